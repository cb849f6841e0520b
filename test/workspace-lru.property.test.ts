/**
 * The byte-bounded, per-workspace LRU behind the finished-view and live-view caches: whatever
 * the sequence of writes, the bounds hold, the books (bytes per workspace) match what is held,
 * and a workspace's writes never evict another workspace's entry while the total has room.
 */
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { WorkspaceLru } from "../src/live/workspace-lru.js";

const op = fc.record({
  ws: fc.constantFrom("a", "b", "c"),
  key: fc.integer({ min: 0, max: 15 }),
  size: fc.integer({ min: 1, max: 600 }),
  del: fc.boolean(),
});

describe("WorkspaceLru", () => {
  test("bounds hold and the per-workspace books match what is held, for any sequence of writes and deletes", () => {
    fc.assert(
      fc.property(
        fc.array(op, { maxLength: 120 }),
        fc.integer({ min: 1, max: 3_000 }),
        fc.integer({ min: 1, max: 3_000 }),
        (ops, maxBytes, share) => {
          const lru = new WorkspaceLru<{ workspaceId: string; body: string }>({
            maxBytes,
            maxBytesPerWorkspace: share,
          });
          const last = new Map<string, string>();
          for (const o of ops) {
            const key = `${o.ws}:${o.key}`;
            if (o.del) {
              lru.delete(key);
              last.delete(key);
              continue;
            }
            const body = `${o.ws}${o.key}`.padEnd(o.size, "x");
            lru.set(key, { workspaceId: o.ws, body });
            last.set(key, body);
            expect(lru.bytes()).toBeLessThanOrEqual(lru.maxBytes);
            for (const ws of ["a", "b", "c"]) {
              expect(lru.bytes(ws)).toBeLessThanOrEqual(lru.maxBytesPerWorkspace);
              // the books: the bytes of the entries of this workspace still held
              let held = 0;
              for (const [k, b] of last) if (k.startsWith(`${ws}:`) && lru.get(k)?.body === b) held += b.length;
              expect(lru.bytes(ws)).toBe(held);
            }
            // what is held is what was last written under that key (never an older body)
            for (const [k, b] of last) {
              const got = lru.get(k);
              if (got) expect(got.body).toBe(b);
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  test("one workspace writing without end evicts only its own entries while the total has room", () => {
    const lru = new WorkspaceLru<{ workspaceId: string; body: string }>({ maxBytes: 4_000 });
    expect(lru.maxBytesPerWorkspace).toBe(1_000);
    lru.set("b:1", { workspaceId: "b", body: "b".repeat(900) });
    for (let i = 0; i < 200; i++) lru.set(`a:${i}`, { workspaceId: "a", body: "a".repeat(300) });
    expect(lru.get("b:1")?.body).toHaveLength(900);
    expect(lru.bytes("a")).toBe(900); // its three newest
    expect(["a:197", "a:198", "a:199"].every((k) => lru.get(k))).toBe(true);
    // a body over the workspace's share is not kept, and drops the key's older body
    lru.set("b:1", { workspaceId: "b", body: "b".repeat(1_001) });
    expect(lru.get("b:1")).toBeUndefined();
    expect(lru.bytes("b")).toBe(0);
  });
});
