/**
 * The HITL middleware format beside Agent Inbox's older HumanInterrupt (graphs/agent-inbox.ts): the
 * interrupt lists every waiting step as an action request with one review config per skill, and
 * `{ decisions: [...] }` (one per action request, in order) becomes our decisions, refused with a
 * message naming the field when it does not fit; our own `{ decisions: { <stepId>: … } }` is left alone.
 */
import { describe, expect, test } from "vitest";
import { fromAgentInbox, humanInterrupt } from "../graphs/agent-inbox.js";
import type { PendingConfirmation } from "../src/kernel/pending.js";

const pending = [
  { stepId: "a", skillName: "core.pass", arguments: { value: 1 }, preview: null, round: 0 },
  { stepId: "b", skillName: "core.pass", arguments: { value: 2 }, preview: null, round: 1 },
  { stepId: "c", skillName: "qtable.write", arguments: { rows: [] }, preview: null, round: 0, kind: "in_doubt" },
] as unknown as PendingConfirmation[];

describe("HITL middleware format", () => {
  test("every waiting step is an action request, in order; one review config per skill", () => {
    const f = humanInterrupt("r1", pending)!;
    expect(f.actionRequests.map((a) => [a.name, a.args])).toEqual([
      ["core.pass", { value: 1 }],
      ["core.pass", { value: 2 }],
      ["qtable.write", { rows: [] }],
    ]);
    expect(f.actionRequests[0]!.description).toContain("Step `a` of run `r1`");
    expect(f.actionRequests[2]!.description).toContain("in doubt");
    expect(f.reviewConfigs).toEqual([
      { actionName: "core.pass", allowedDecisions: ["approve", "edit", "reject"] },
      { actionName: "qtable.write", allowedDecisions: ["approve", "reject"] },
    ]);
    // the older format still describes the first step
    expect(f.action_request).toEqual({ action: "core.pass", args: { value: 1 } });
  });

  test("approve, edit and reject answer the steps in order, each for its own round", () => {
    expect(
      fromAgentInbox(
        {
          decisions: [
            { type: "edit", editedAction: { name: "core.pass", args: { value: 10 } } },
            { type: "reject", message: "not now" },
            { type: "approve" },
          ],
        },
        pending,
      ),
    ).toEqual({
      kind: "decisions",
      value: {
        decisions: {
          a: { decision: "approve", arguments: { value: 10 }, round: 0, via: "studio" },
          b: { decision: "reject", comment: "not now", round: 1, via: "studio" },
          c: { decision: "approve", round: 0, via: "studio" },
        },
      },
    });
  });

  test.each([
    [{ decisions: [{ type: "approve" }] }, "decisions: 1 decision for 3 action requests; answer each, in order"],
    [
      { decisions: [{ type: "approve" }, { type: "ignore" }, { type: "approve" }] },
      "decisions[1].type: expected approve, edit or reject",
    ],
    [
      {
        decisions: [
          { type: "edit", editedAction: { name: "core.fail", args: {} } },
          { type: "approve" },
          { type: "approve" },
        ],
      },
      "decisions[0].editedAction.name: the step runs core.pass; it cannot be changed",
    ],
    [
      { decisions: [{ type: "edit", editedAction: { args: 3 } }, { type: "approve" }, { type: "approve" }] },
      "decisions[0].editedAction.args: expected the step's arguments (an object)",
    ],
    [
      { decisions: [{ type: "approve" }, { type: "approve" }, { type: "edit", editedAction: { args: {} } }] },
      'decisions[2]: step "c" is not a confirmation: its arguments cannot be edited',
    ],
    [
      { decisions: [{ type: "approve" }, { type: "reject", message: 7 }, { type: "approve" }] },
      "decisions[1].message: expected a string",
    ],
  ])("refused, naming the field: %j", (raw, message) => {
    expect(fromAgentInbox(raw, pending)).toEqual({ kind: "invalid", message });
  });

  test("our own resume value is not read as either format", () => {
    expect(fromAgentInbox({ decisions: { a: { decision: "approve" } } }, pending)).toBeUndefined();
    expect(fromAgentInbox({ cancel: true }, pending)).toBeUndefined();
  });
});
