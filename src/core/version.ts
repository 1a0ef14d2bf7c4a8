/** Kept equal to package.json by test/version.test.ts; names our Redis scripts per version. */
export const VERSION = '0.1.0';
