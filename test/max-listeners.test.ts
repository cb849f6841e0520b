/**
 * Wide runs must not trip Node's MaxListenersExceededWarning: a functional-API task inherits its
 * node's abort signal, and each running task used to add one listener to it (see
 * graphs/durable-task.ts). Runs a 200-wide fan-out, a wide run cancelled mid-flight and a wide
 * durable run on Postgres, and checks the process 'warning' events and that no per-task
 * controller outlives its task.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { createRuntime, type RunView } from "../src/index.js";
import { durableTasksInFlight } from "../graphs/durable-task.js";
import { postgresBackend } from "./helpers/backends.js";
import { settle } from "./helpers/run.js";

const warnings: Error[] = [];
const onWarning = (w: Error) => void warnings.push(w);
beforeAll(() => void process.on("warning", onWarning));
afterAll(() => void process.off("warning", onWarning));

const wide = (n: number, ms: number) => ({
  steps: Array.from({ length: n }, (_, i) => ({
    stepId: `s${i}`,
    skillName: "core.wait",
    dependsOn: [],
    arguments: { ms, value: i },
  })),
});

/** Warnings are emitted on a later tick: let them arrive before reading them. */
async function maxListenerWarnings(): Promise<string[]> {
  await new Promise((r) => setTimeout(r, 20));
  return warnings.filter((w) => w.name === "MaxListenersExceededWarning").map((w) => w.message);
}

function expectAllCompleted(view: RunView, n: number) {
  expect(view.status).toBe("completed");
  expect(view.steps.filter((s) => s.status === "completed")).toHaveLength(n);
}

test("a 200-wide fan-out (memory) adds no listener warning and leaves no task signal behind", async () => {
  const rt = createRuntime();
  const { view } = await settle(rt.run(wide(200, 5)));
  expectAllCompleted(view, 200);
  expect(await maxListenerWarnings()).toEqual([]);
  expect(durableTasksInFlight()).toBe(0);
});

test("cancelling a wide run mid-flight aborts every step without a listener warning", async () => {
  const rt = createRuntime();
  const h = rt.run(wide(50, 5_000));
  // wait until the steps are running, then cancel
  for await (const e of h.events) if (e.type === "step_started" && e.stepId === "s49") break;
  const { view } = await settle(await rt.cancel(h.runId, "stop"));
  expect(view.status).toBe("cancelled");
  expect(view.steps.every((s) => s.status === "cancelled")).toBe(true);
  expect(await maxListenerWarnings()).toEqual([]);
  expect(durableTasksInFlight()).toBe(0);
});

test(`a 100-wide durable fan-out (${postgresBackend.name}) adds no listener warning`, async () => {
  const { runtime, close } = await postgresBackend.open();
  try {
    const { view } = await settle(runtime.run(wide(100, 5)));
    expectAllCompleted(view, 100);
    expect(await maxListenerWarnings()).toEqual([]);
    expect(durableTasksInFlight()).toBe(0);
  } finally {
    await close();
  }
}, 60_000);
