/** A promise a test opens by hand: a handler awaits it to hold a slice in flight. */
export class Gate {
  readonly opened: Promise<void>;
  open!: () => void;
  constructor() {
    this.opened = new Promise((resolve) => (this.open = resolve));
  }
}
