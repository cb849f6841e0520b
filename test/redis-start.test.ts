/**
 * A REDIS_URL nothing answers at is a configuration error: the start fails at once with REDIS_URL
 * named (its password hidden) and why, never a bare "Connection is closed." and never a start that
 * waits forever (the subscriber queues its subscribe while offline). No Redis needed: a closed
 * port and a TCP server that never answers stand in for a Redis that is down or hung.
 */
import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { bundleEntry } from "../scripts/bundle.js";
import { openLive } from "../src/live/index.js";
import { RedisSignalTransport, RedisViewCache, shownRedisUrl } from "../src/live/redis.js";
import { MemoryRunStore } from "../src/store/memory-run-store.js";
import { seedDataDir } from "./helpers/prebuilt.js";

const closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** A server that accepts connections and never answers (a hung Redis, a wrong port). */
async function silentServer(): Promise<number> {
  const sockets = new Set<Socket>();
  const s: Server = createServer((c) => void sockets.add(c));
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()));
  closers.push(
    () =>
      new Promise<void>((r) => {
        for (const c of sockets) c.destroy();
        s.close(() => r());
      }),
  );
  return (s.address() as { port: number }).port;
}

describe("REDIS_URL unreachable at start", () => {
  test("nothing listens: openLive fails at once naming REDIS_URL and the refusal, the password hidden", async () => {
    const port = await closedPort();
    const url = `redis://:s3cret-pw@127.0.0.1:${port}`;
    const t0 = Date.now();
    const err = await openLive({ store: new MemoryRunStore(), redisUrl: url }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(err?.message).toBe(
      `REDIS_URL redis://:***@127.0.0.1:${port}: Redis is not reachable (ECONNREFUSED); ` +
        "start it, fix REDIS_URL, or unset it (live events then travel over Postgres LISTEN/NOTIFY)",
    );
    expect(err?.message).not.toContain("s3cret-pw");
    expect(shownRedisUrl("not a url")).toBe("(not a URL)");
  });

  test("a server that never answers: the cache's connect and the transport's subscribe give up after their bound", async () => {
    const port = await silentServer();
    const url = `redis://127.0.0.1:${port}`;
    const cache = new RedisViewCache({ url, namespace: "t", startTimeoutMs: 300 });
    closers.push(() => cache.close());
    await expect(cache.connect()).rejects.toThrow(
      /^REDIS_URL redis:\/\/127\.0\.0\.1:\d+\/?: .*\(no answer in 300 ms\)/,
    );
    const transport = new RedisSignalTransport({ url, namespace: "t", startTimeoutMs: 300 });
    const t0 = Date.now();
    await expect(
      transport.start(
        () => undefined,
        () => undefined,
      ),
    ).rejects.toThrow(/^REDIS_URL .*not reachable/);
    expect(Date.now() - t0).toBeLessThan(5_000);
    // and it closes without waiting for a Redis that is not there
    const c0 = Date.now();
    await transport.close();
    expect(Date.now() - c0).toBeLessThan(1_000);
  });

  test.runIf(process.platform === "linux")(
    "the bundled server (as `npm start` runs it) exits non-zero with that message",
    async () => {
      const port = await closedPort();
      const bundle = await bundleEntry("src/cli/main.ts");
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        PORT: "0",
        REDIS_URL: `redis://:s3cret-pw@127.0.0.1:${port}`,
        DATABASE_URL: "",
        TOOLCHAIN_DATA_DIR: seedDataDir(mkdtempSync(path.join(tmpdir(), "tc-redis-start-"))),
      };
      const r = await new Promise<{ code: number | null; out: string }>((resolve) => {
        const p = execFile(process.execPath, [bundle, "serve"], { env, timeout: 90_000 }, (e, stdout, stderr) =>
          resolve({ code: p.exitCode ?? (e ? 1 : 0), out: stdout + stderr }),
        );
      });
      expect(r.code).not.toBe(0);
      expect(r.out).toContain(`REDIS_URL redis://:***@127.0.0.1:${port}: Redis is not reachable (ECONNREFUSED)`);
      expect(r.out).not.toContain("s3cret-pw");
    },
    120_000,
  );
});
