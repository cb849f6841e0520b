/** A minimal unbounded async queue: the scheduler loop awaits the next completion. */
export class AsyncQueue<T> {
  private readonly items: T[] = [];
  private head = 0;
  private waiter: ((v: T) => void) | undefined;
  push(v: T): void {
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = undefined;
      w(v);
    } else this.items.push(v);
  }
  /** Everything queued and not yet taken. */
  drain(): T[] {
    const rest = this.items.slice(this.head);
    this.items.length = 0;
    this.head = 0;
    return rest;
  }
  shift(): Promise<T> {
    if (this.head < this.items.length) {
      const v = this.items[this.head++]!;
      if (this.head > 1024 && this.head * 2 > this.items.length) {
        this.items.splice(0, this.head);
        this.head = 0;
      }
      return Promise.resolve(v);
    }
    return new Promise((r) => (this.waiter = r));
  }
}
