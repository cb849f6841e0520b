/**
 * The toolchain graph: START -> (planner, for a request) -> scheduler <-> approval, scheduler ->
 * compensation (<-> rollback_approval in strict mode). No node of its own ends a run: the node
 * whose superstep ends it writes the final status and terminal event (graphs/finish.ts), so a
 * one-step run given its plan is one superstep, like a one-node LangGraph graph.
 * Steps are not nodes: they are durable tasks launched by the scheduler node (one per attempt),
 * so successors start the moment their dependencies finish (no superstep barrier).
 */
import { END, START, StateGraph, type BaseCheckpointSaver, type LangGraphRunnableConfig } from "@langchain/langgraph";
import { coreSkills } from "../skills/core/index.js";
import { MemoryTableStore } from "../skills/qtable/memory-store.js";
import { qtableSkills } from "../skills/qtable/index.js";
import { SkillRegistry } from "../src/skills/registry.js";
import { makeApprovalNode } from "./approval-node.js";
import { makeCompensationNode } from "./compensation/index.js";
import { changesOnly } from "./changes-only.js";
import { eventsBeforeWrites } from "./emit.js";
import { defaultEnv, type RuntimeEnv } from "./env.js";
import { makePlannerNode, requestOf } from "./planner-node.js";
import { makeRollbackApprovalNode } from "./rollback-approval-node.js";
import { makeSchedulerNode } from "./scheduler/index.js";
import { GraphInputSchema, GraphOutputSchema } from "./io.js";
import { RunStateAnnotation, type RunState } from "./state.js";

// Named routers: the graph drawing (Studio, getGraph()) and stack traces show these names.

export function entry(state: RunState): "planner" | "scheduler" {
  // a given plan (or nothing to plan: the scheduler fails the run with the code) skips planning
  return requestOf(state) === undefined ? "scheduler" : "planner";
}

export function afterPlanner(state: RunState): "scheduler" | typeof END {
  // a planner that failed ended the run in its own superstep
  return state.status === "failed" ? END : "scheduler";
}

// The scheduler and the compensation node end the run themselves exactly when these send it to END.
export function afterScheduler(state: RunState): "scheduler" | "approval" | "compensation" | typeof END {
  if (state.halt) return "compensation";
  if (state.segmentEnded) return "scheduler";
  if (state.status === "waiting_confirmation") return "approval";
  return END;
}

export function afterCompensation(state: RunState): "rollback_approval" | typeof END {
  return state.rollbackBlocked ? "rollback_approval" : END;
}

export function afterRollbackApproval(state: RunState): "compensation" | "rollback_approval" {
  return state.rollbackDecision ? "compensation" : "rollback_approval";
}

export function buildToolchainGraph(env: RuntimeEnv) {
  // explicit input and output schemas: only `{ plan | request, context?, memory?, runId? }` of an
  // input reaches state (graphs/io.ts), and Studio's form is generated from them
  // every node's events are stored before its writes (graphs/emit.ts), and its writes are only
  // the channels it changes (graphs/changes-only.ts)
  const node = <U>(n: (s: RunState, c: LangGraphRunnableConfig) => Promise<U>) =>
    eventsBeforeWrites(env, async (s: RunState, c: LangGraphRunnableConfig) => changesOnly(s, await n(s, c)));
  return new StateGraph({ state: RunStateAnnotation, input: GraphInputSchema, output: GraphOutputSchema })
    .addNode("planner", node(makePlannerNode(env)))
    .addNode("scheduler", node(makeSchedulerNode(env)))
    .addNode("approval", node(makeApprovalNode(env)))
    .addNode("compensation", node(makeCompensationNode(env)))
    .addNode("rollback_approval", node(makeRollbackApprovalNode(env)))
    .addConditionalEdges(START, entry, ["planner", "scheduler"])
    .addConditionalEdges("planner", afterPlanner, ["scheduler", END])
    .addConditionalEdges("scheduler", afterScheduler, ["scheduler", "approval", "compensation", END])
    .addEdge("approval", "scheduler")
    .addConditionalEdges("compensation", afterCompensation, ["rollback_approval", END])
    .addConditionalEdges("rollback_approval", afterRollbackApproval, ["compensation", "rollback_approval"]);
}

export function compileToolchainGraph(env: RuntimeEnv, checkpointer?: BaseCheckpointSaver) {
  return buildToolchainGraph(env).compile({ checkpointer, name: "toolchain" });
}

/**
 * For langgraph.json / LangGraph Studio: the graph over the built-in skills, core.* and the QTable
 * pack on an in-memory table store (the dev server is a debugger: its threads and these tables
 * live in its process), so the README's approval-system chain and `{ request }` inputs planned by
 * the fallback planner run there as they do through the API.
 */
export const graph = compileToolchainGraph(
  defaultEnv(new SkillRegistry([...coreSkills, ...qtableSkills({ store: new MemoryTableStore() })])),
);
