/**
 * The words every text surface uses for a skill version changed while a step waited
 * (src/kernel/version-notice.ts), and the chat agent's interrupt carrying them.
 */
import { describe, expect, test } from "vitest";
import { fieldChanges, versionChangeLines } from "../src/kernel/version-notice.js";
import { confirmationInterrupt } from "../src/tools/agent-confirmation.js";

const v1 = { version: "1.0.0", hash: "aaaaaaaaaaaaaaaa" };
const v2 = { version: "2.0.0", hash: "bbbbbbbbbbbbbbbb" };
const waiting = {
  stepId: "n",
  skillName: "t.notify",
  arguments: { label: "ok" },
  preview: { message: "notify ok" },
  kind: "confirmation" as const,
  round: 0,
  versionChanged: {
    from: v1,
    to: v2,
    arguments: { name: "ok" },
    preview: { message: "notify ok", channel: "email" },
  },
};

describe("version notice", () => {
  test("says the versions, the arguments and the preview as the new version has them, and which fields differ", () => {
    expect(versionChangeLines(waiting, (v) => JSON.stringify(v))).toEqual([
      "The skill changed while this step waited: t.notify 1.0.0 → 2.0.0; approving runs the new version.",
      'Arguments as the new version runs them (label removed, name added): {"name":"ok"}',
      'Preview by the new version, unlike the one shown (channel added): {"message":"notify ok","channel":"email"}',
    ]);
  });

  test("an error instead; a version number shared by two schemas is told apart by hash; nothing without a change", () => {
    const same = { version: "1.0.0", hash: "cccccccccccccccc" };
    const lines = versionChangeLines(
      {
        ...waiting,
        versionChanged: { from: v1, to: same, error: { code: "INVALID_INPUT", message: "arguments.name: required" } },
      },
      String,
    );
    expect(lines).toEqual([
      "The skill changed while this step waited: t.notify 1.0.0 (aaaaaaaa) → 1.0.0 (cccccccc); approving runs the new version.",
      "Approving would fail the step: INVALID_INPUT: arguments.name: required",
    ]);
    expect(versionChangeLines({ ...waiting, versionChanged: undefined }, String)).toEqual([]);
    expect(fieldChanges(1, 2)).toBe("changed");
    expect(fieldChanges({ a: 1, b: 1 }, { a: 2, b: 1 })).toBe("a changed");
  });

  test("the chat agent's interrupt message names the step and the change", () => {
    const i = confirmationInterrupt({ runId: "r1", status: "waiting_confirmation", pending: [waiting], steps: [] });
    expect(i.message).toContain(
      '"n": The skill changed while this step waited: t.notify 1.0.0 → 2.0.0; approving runs the new version.',
    );
    expect(i.pending[0]!.versionChanged).toEqual(waiting.versionChanged);
  });
});
