/**
 * The confirmation prompt in a real pseudo-terminal (`script` from util-linux), against a server
 * (--url, a personal key): single keys answer at once (no Enter), and a decision made elsewhere
 * while the prompt is open ends it with what happened and who did it.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { call, serveApi, type ApiUnderTest } from "./helpers/api.js";
import { postgresBackend } from "./helpers/backends.js";
import { pty, stripAnsi } from "./helpers/pty.js";

const WS = "ws-prompt";
const dir = mkdtempSync(path.join(tmpdir(), "tc-prompt-"));
const twoApprovals = path.join(dir, "two.json");
writeFileSync(
  twoApprovals,
  JSON.stringify({
    steps: [
      { stepId: "p1", skillName: "core.pass", arguments: { value: 1 }, requireConfirmation: true },
      { stepId: "p2", skillName: "core.pass", arguments: { value: 2 }, requireConfirmation: true },
    ],
  }),
);

describe("the CLI's confirmation prompt in a pseudo-terminal", () => {
  let api: ApiUnderTest;
  let close: () => Promise<void>;
  const keys: Record<string, string> = {};
  beforeAll(async () => {
    const o = await postgresBackend.open();
    api = await serveApi(o.runtime, o.db);
    await api.access.ensureWorkspace(WS);
    keys.ana = (await api.access.createKey(WS, { user: { id: "ana", name: "Ana Lopez" } })).key;
    keys.bob = (await api.access.createKey(WS, { user: { id: "bob", name: "Bob Stone" } })).key;
    close = async () => {
      await api.close();
      await o.close();
    };
  }, 180_000);
  afterAll(() => close?.());

  test("y / n answer on one key; a decision made elsewhere while asking is reported with who made it", async () => {
    let runId = "";
    const r = await pty(
      ["run", twoApprovals, "--url", api.url, "--key", keys.ana!],
      [
        // one key, no Enter
        { when: /Decide "p1": \[y\] approve {2}\[n\] reject {2}\[Enter\] leave it waiting › $/m, then: (w) => w("n") },
        {
          when: /Decide "p2": .* › $/m,
          // Bob rejects p2 through the API while Ana's prompt is open
          then: async (_w, out) => {
            runId = /run ([0-9a-f-]{36})/.exec(stripAnsi(out))![1]!;
            const rejected = await call(api.url, "POST", `/api/tool-chains/runs/${runId}/confirm`, {
              key: keys.bob,
              body: { stepId: "p2", decision: "reject", comment: "not today" },
            });
            expect(rejected.status).toBe(200);
          },
        },
      ],
    );
    const plain = stripAnsi(r.stdout);
    expect(plain).toContain('Rejecting "p1"…');
    expect(plain).toContain('Step "p2" was rejected by Bob Stone (via rest) while this prompt was open.');
    expect(plain).not.toContain("nothing was decided");
    expect(plain).not.toContain("CONFIRMATION_NOT_PENDING");
    expect(r.code).toBe(1);
    const view = (await call(api.url, "GET", `/api/tool-chains/runs/${runId}`, { key: keys.ana })).body;
    expect(view.status).toBe("failed");
    expect(
      view.steps.map((s: { decision: { by: { id: string }; via: string } }) => [s.decision.by.id, s.decision.via]),
    ).toEqual([
      ["ana", "cli"],
      ["bob", "rest"],
    ]);
  }, 300_000);

  test("Enter after a rejection leaves the other step waiting, and says so (not 'nothing was decided')", async () => {
    const r = await pty(
      ["run", twoApprovals, "--url", api.url, "--key", keys.ana!],
      [
        { when: /Decide "p1".* › $/m, then: (w) => w("n") },
        { when: /Decide "p2".* › $/m, then: (w) => w("\r") },
      ],
    );
    const plain = stripAnsi(r.stdout);
    expect(r.code).toBe(3);
    expect(plain).toMatch(/Run \S+ still waits for confirmation of "p2" \(left waiting\)\. Later:/);
    expect(plain).not.toContain("nothing was decided");
    expect(plain).not.toContain("<runId>");
  }, 300_000);
});
