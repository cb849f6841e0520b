/** Reading a run handle to its end: every event it produced and the final view. */
import type { RunEvent, RunView } from "../../src/index.js";

export async function settle(h: {
  events: AsyncIterable<RunEvent>;
  result: Promise<RunView>;
}): Promise<{ events: RunEvent[]; view: RunView }> {
  const events: RunEvent[] = [];
  for await (const e of h.events) events.push(e);
  return { events, view: await h.result };
}

export const stepOf = (v: RunView, id: string) => v.steps.find((s) => s.stepId === id)!;
