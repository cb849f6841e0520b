/**
 * The toolchain graph: planner -> scheduler <-> approval, scheduler -> compensation (<->
 * rollback_approval in strict mode) -> observer.
 * Steps are not nodes: they are durable tasks launched by the scheduler node (one per attempt),
 * so successors start the moment their dependencies finish (no superstep barrier).
 */
import { END, START, StateGraph, type BaseCheckpointSaver } from "@langchain/langgraph";
import { coreSkills } from "../skills/core/index.js";
import { MemoryTableStore } from "../skills/qtable/memory-store.js";
import { qtableSkills } from "../skills/qtable/index.js";
import { SkillRegistry } from "../src/skills/registry.js";
import { makeApprovalNode } from "./approval-node.js";
import { makeCompensationNode } from "./compensation-node.js";
import { defaultEnv, type RuntimeEnv } from "./env.js";
import { makeObserverNode } from "./observer-node.js";
import { makePlannerNode } from "./planner-node.js";
import { makeRollbackApprovalNode } from "./rollback-approval-node.js";
import { makeSchedulerNode } from "./scheduler/index.js";
import { GraphInputSchema, GraphOutputSchema } from "./io.js";
import { RunStateAnnotation, type RunState } from "./state.js";

// Named routers: the graph drawing (Studio, getGraph()) and stack traces show these names.

export function afterPlanner(state: RunState): "scheduler" | "observer" {
  return state.status === "failed" ? "observer" : "scheduler";
}

export function afterScheduler(state: RunState): "scheduler" | "approval" | "compensation" | "observer" {
  if (state.halt) return "compensation";
  if (state.segmentEnded) return "scheduler";
  if (state.status === "waiting_confirmation") return "approval";
  return "observer";
}

export function afterCompensation(state: RunState): "rollback_approval" | "observer" {
  return state.rollbackBlocked ? "rollback_approval" : "observer";
}

export function afterRollbackApproval(state: RunState): "compensation" | "rollback_approval" {
  return state.rollbackDecision ? "compensation" : "rollback_approval";
}

export function buildToolchainGraph(env: RuntimeEnv) {
  // explicit input and output schemas: only `{ plan | request, context?, memory?, runId? }` of an
  // input reaches state (graphs/io.ts), and Studio's form is generated from them
  return new StateGraph({ state: RunStateAnnotation, input: GraphInputSchema, output: GraphOutputSchema })
    .addNode("planner", makePlannerNode(env))
    .addNode("scheduler", makeSchedulerNode(env))
    .addNode("approval", makeApprovalNode(env))
    .addNode("compensation", makeCompensationNode(env))
    .addNode("rollback_approval", makeRollbackApprovalNode(env))
    .addNode("observer", makeObserverNode(env))
    .addEdge(START, "planner")
    .addConditionalEdges("planner", afterPlanner, ["scheduler", "observer"])
    .addConditionalEdges("scheduler", afterScheduler, ["scheduler", "approval", "compensation", "observer"])
    .addEdge("approval", "scheduler")
    .addConditionalEdges("compensation", afterCompensation, ["rollback_approval", "observer"])
    .addConditionalEdges("rollback_approval", afterRollbackApproval, ["compensation", "rollback_approval"])
    .addEdge("observer", END);
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
export const graph = compileToolchainGraph(defaultEnv(new SkillRegistry([...coreSkills, ...qtableSkills({ store: new MemoryTableStore() })])));
