/**
 * Open event streams per API key (per process): a key at its limit gets 429 TOO_MANY_STREAMS
 * until one of its streams ends, so one tenant cannot hold the process's connections and polls.
 */
import { ErrorCode, ToolchainError } from "../kernel/errors.js";

export class StreamSlots {
  private readonly open = new Map<string, number>();

  /** @param perKey 0: unlimited */
  constructor(readonly perKey: number) {}

  /** Takes a slot for `keyId` or throws TOO_MANY_STREAMS; call the returned function once when the stream ends. */
  acquire(keyId: string): () => void {
    const n = this.open.get(keyId) ?? 0;
    if (this.perKey > 0 && n >= this.perKey) {
      throw new ToolchainError(
        ErrorCode.TOO_MANY_STREAMS,
        `this key already has ${n} open event streams (the limit is ${this.perKey}); close one first`,
        { details: { limit: this.perKey } },
      );
    }
    this.open.set(keyId, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.open.get(keyId) ?? 1) - 1;
      if (left > 0) this.open.set(keyId, left);
      else this.open.delete(keyId);
    };
  }

  count(keyId: string): number {
    return this.open.get(keyId) ?? 0;
  }
}
