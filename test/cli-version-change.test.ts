/**
 * The CLI's confirmation prompt after a deploy, in a pseudo-terminal against a server (--url):
 * approving one step leaves the run waiting on another that began waiting under the skill's
 * previous version; before asking, the prompt says the version changed and what differs.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createRuntime } from "../src/runtime/runtime.js";
import { MemoryAccessStore } from "../src/store/access-store.js";
import { call, serveApi, type ApiUnderTest } from "./helpers/api.js";
import { notifyV2, waitingUnderV1 } from "./helpers/deploy.js";
import { pty, stripAnsi } from "./helpers/pty.js";

const WS = "ws-cli-version";
let api: ApiUnderTest;
let key: string;
let runId = "";
beforeAll(async () => {
  const first = await waitingUnderV1(
    [
      {
        steps: [
          { stepId: "p", skillName: "core.pass", arguments: { value: 1 }, requireConfirmation: true },
          { stepId: "n", skillName: "t.notify", arguments: { label: "" } },
        ],
      },
    ],
    WS,
  );
  runId = first.runIds[0]!;
  const access = new MemoryAccessStore();
  const runtime = createRuntime({ skills: [notifyV2], checkpointer: first.checkpointer, store: first.store });
  api = await serveApi(runtime, undefined, { access });
  await access.ensureWorkspace(WS, {});
  key = (await access.createKey(WS, {})).key;
}, 120_000);
afterAll(() => api?.close());

describe("the CLI prompt after a deploy", () => {
  test("the waiting step's version change and why approving would fail are shown before the question", async () => {
    const r = await pty(
      ["approve", runId, "p", "--url", api.url, "--key", key],
      [{ when: /Decide "n"/, then: (write) => write("\r") }],
    );
    const out = stripAnsi(r.stdout);
    expect(out).toContain(
      "The skill changed while this step waited: t.notify 1.0.0 → 2.0.0; approving runs the new version.",
    );
    expect(out).toContain("Approving would fail the step: INVALID_INPUT: arguments.name: a name is required");
    // said before the question, which Enter left waiting
    expect(out.indexOf("The skill changed")).toBeLessThan(out.indexOf('Decide "n"'));
    expect(r.code).toBe(3);
    const view = await call(api.url, "GET", `/api/tool-chains/runs/${runId}`, { key });
    expect(view.body.pendingConfirmations.map((p: { stepId: string }) => p.stepId)).toEqual(["n"]);
  }, 150_000);
});
