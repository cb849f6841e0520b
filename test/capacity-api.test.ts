/**
 * Capacity bounds through the real HTTP API (random port, Postgres: embedded or DATABASE_URL):
 * reference amplification fails fast with VALUE_TOO_LARGE while another workspace's run
 * completes promptly, and over-limit traffic from one address is refused before its body is read.
 */
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { postgresBackend } from "./helpers/backends.js";
import { call, newKey, serveApi, type ApiUnderTest } from "./helpers/api.js";

/** ~130 KB of plan: one 100 KB output named 1,000 times (100 MB once resolved). */
const amplification = {
  steps: [
    { stepId: "big", skillName: "core.pass", arguments: { value: "x".repeat(100_000) } },
    {
      stepId: "fan",
      skillName: "core.pass",
      dependsOn: ["big"],
      arguments: { value: Array.from({ length: 1_000 }, () => ({ $ref: "steps.big" })) },
    },
  ],
};

describe(`capacity over HTTP on ${postgresBackend.name}`, () => {
  let api: ApiUnderTest;
  let close: () => Promise<void>;
  let keyA: string;
  let keyB: string;

  beforeAll(async () => {
    const o = await postgresBackend.open();
    api = await serveApi(o.runtime, o.db);
    keyA = await newKey(api.access, "ws-amp-a");
    keyB = await newKey(api.access, "ws-amp-b");
    close = async () => {
      await api.close();
      await o.close();
    };
  });
  afterAll(() => close?.());

  test("reference amplification fails fast with VALUE_TOO_LARGE naming the step and field; another workspace's run completes meanwhile", async () => {
    expect(JSON.stringify(amplification).length).toBeLessThan(130_000);
    const t0 = performance.now();
    const amp = call(api.url, "POST", "/api/tool-chains/run", { key: keyA, body: { plan: amplification } }).then(
      (r) => ({ r, ms: performance.now() - t0 }),
    );
    const other = call(api.url, "POST", "/api/tool-chains/run", {
      key: keyB,
      body: { plan: { steps: [{ stepId: "one", skillName: "core.pass", arguments: { value: 1 } }] } },
    }).then((r) => ({ r, ms: performance.now() - t0 }));
    const [a, b] = await Promise.all([amp, other]);
    expect(b.r.status).toBe(200);
    expect(b.r.body.status).toBe("completed");
    expect(b.ms).toBeLessThan(5_000);
    expect(a.ms).toBeLessThan(5_000);
    expect(a.r.body.status).toBe("failed");
    const fan = a.r.body.steps.find((s: { stepId: string }) => s.stepId === "fan");
    expect(fan.status).toBe("failed");
    expect(fan.error.code).toBe("VALUE_TOO_LARGE");
    expect(fan.error.message).toMatch(
      /^step "fan": arguments\.value\.\d+: the resolved arguments are larger than the value budget of 4 MiB/,
    );
    expect(fan.error.details).toMatchObject({
      field: expect.stringMatching(/^arguments\.value\.\d+$/),
      limit: 4 * 1024 * 1024,
    });
    // the run's history holds no copy of the 100 MB
    const events = await call(api.url, "GET", `/api/tool-chains/runs/${a.r.body.runId}/events`, { key: keyA });
    expect(events.text.length).toBeLessThan(1_000_000);
  });

  test("statically over the budget (a context value named 1,000 times): refused at validation, 400 VALUE_TOO_LARGE", async () => {
    const plan = {
      steps: [
        {
          stepId: "s1",
          skillName: "core.pass",
          arguments: { value: Array.from({ length: 1_000 }, () => ({ $ref: "context.blob" })) },
        },
      ],
    };
    const r = await call(api.url, "POST", "/api/tool-chains/run", {
      key: keyA,
      body: { plan, context: { blob: "c".repeat(100_000) } },
    });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe("VALUE_TOO_LARGE");
    expect(r.body.error.message).toContain(
      'step "s1": arguments: the resolved arguments are larger than the value budget of 4 MiB',
    );
  });
});

describe("a flood from one address is refused before any work it does not need", () => {
  let api: ApiUnderTest;
  let close: () => Promise<void>;
  let key: string;

  beforeAll(async () => {
    const o = await postgresBackend.open();
    api = await serveApi(o.runtime, o.db, { limits: { requestsPerMinutePerIp: 3, bodyBytes: 1_048_576 } });
    key = await newKey(api.access, "ws-flood");
    close = async () => {
      await api.close();
      await o.close();
    };
  });
  afterAll(() => close?.());

  /** Sends the headers of a request announcing a 500 MB body and 1 KB of it; resolves with the status line when the server answers. */
  const hugeBody = (path: string, auth: string) =>
    new Promise<{ statusLine: string; head: string; sentBytes: number }>((resolve, reject) => {
      const { port } = new URL(api.url);
      const sock = connect(Number(port), "127.0.0.1");
      let head = "";
      sock.setEncoding("latin1");
      sock.on("error", reject);
      sock.on("data", (d) => {
        head += d;
        if (head.includes("\r\n\r\n")) {
          resolve({ statusLine: head.slice(0, head.indexOf("\r\n")), head, sentBytes: 1_024 });
          sock.destroy();
        }
      });
      sock.write(
        `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${auth}\r\nContent-Type: application/json\r\nContent-Length: 500000000\r\n\r\n`,
      );
      sock.write(`{"plan":"${"p".repeat(1_000)}`);
    });

  test("a 429 answers a huge body without reading it, before helmet and the router", async () => {
    // spend the address's budget (bogus keys: 401, each counted)
    for (let i = 0; i < 3; i++)
      expect((await call(api.url, "GET", "/api/skills", { key: `tck_bogus${i}` })).status).toBe(401);
    const t0 = performance.now();
    const r = await hugeBody("/api/tool-chains/run", key);
    expect(r.statusLine).toBe("HTTP/1.1 429 Too Many Requests");
    // answered after 1 KB of the announced 500 MB: nothing read the body (a parser would wait for it, or answer 413)
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(r.head.toLowerCase()).toContain("retry-after:");
    // refused before helmet ran: its headers are not set on the 429
    expect(r.head.toLowerCase()).not.toContain("content-security-policy");
    // the same on /mcp
    expect((await hugeBody("/mcp", key)).statusLine).toBe("HTTP/1.1 429 Too Many Requests");
    const j = await call(api.url, "GET", "/api/skills", { key });
    expect(j.status).toBe(429);
    expect(j.body.error.code).toBe("TOO_MANY_REQUESTS");
    expect(j.headers.get("x-content-type-options")).toBe("nosniff");
  });
});
