import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, test } from "vitest";
import { ownerOf, serializerTime, summarise, type CpuProfile } from "../bench/profile.js";

// the project's root as a file path, and a file of it as a profile's frame names it (a file URL)
const ROOT = fileURLToPath(new URL("..", import.meta.url)).replace(/\/$/, "");
const fileUrl = (rel: string) => pathToFileURL(`${ROOT}/${rel}`).href;
const frame = (functionName: string, url: string) => ({ functionName, url, lineNumber: 1 });

// root → putWrites → dumpsTyped → stringify; root → put → dumpsTyped; root → ours; gc; idle
const profile: CpuProfile = {
  nodes: [
    { id: 1, callFrame: frame("(root)", ""), children: [2, 5, 7, 8, 9] },
    {
      id: 2,
      callFrame: frame("putWrites", "file:///x/node_modules/@langchain/langgraph-checkpoint/dist/memory.js"),
      children: [3],
    },
    {
      id: 3,
      callFrame: frame("dumpsTyped", "file:///x/node_modules/@langchain/langgraph-checkpoint/dist/serde/jsonplus.js"),
      children: [4],
    },
    { id: 4, callFrame: frame("stringify", "file:///x/node_modules/fast-safe-stringify/index.js") },
    {
      id: 5,
      callFrame: frame("put", "file:///x/node_modules/@langchain/langgraph-checkpoint/dist/memory.js"),
      children: [6],
    },
    {
      id: 6,
      callFrame: frame("dumpsTyped", "file:///x/node_modules/@langchain/langgraph-checkpoint/dist/serde/jsonplus.js"),
    },
    { id: 7, callFrame: frame("startAttempt", fileUrl("src/kernel/execute-attempt.ts")) },
    { id: 8, callFrame: frame("(garbage collector)", "") },
    { id: 9, callFrame: frame("(idle)", "") },
  ],
  // 1 ms per sample
  samples: [4, 4, 3, 6, 7, 7, 7, 8, 9, 9, 2],
  timeDeltas: Array(11).fill(1000),
  startTime: 0,
  endTime: 11_000,
};

describe("bench profile summary", () => {
  test("frames are attributed to their owner", () => {
    expect(ownerOf(frame("x", "file:///a/node_modules/@langchain/langgraph/dist/pregel/loop.js"))).toBe("langgraph");
    expect(ownerOf(frame("x", "file:///a/node_modules/@langchain/core/dist/x.js"))).toBe("core");
    expect(ownerOf(frame("x", "file:///a/node_modules/langsmith/dist/x.js"))).toBe("langsmith");
    expect(ownerOf(frame("x", fileUrl("graphs/emit.ts")))).toBe("ours");
    expect(ownerOf(frame("x", "node:internal/timers"))).toBe("node");
    expect(ownerOf(frame("(garbage collector)", ""))).toBe("gc");
  });

  test("self time sums per owner and per function, idle apart", () => {
    const { byOwner, byFrame } = summarise(profile);
    expect(byOwner).toEqual({ checkpoint: 5, ours: 3, gc: 1, idle: 2 });
    expect([...byFrame.values()].reduce((s, e) => s + e.ms, 0)).toBe(11);
  });

  test("serializer time is split by the saver method that called it, inclusive of its callees", () => {
    expect(serializerTime(profile)).toEqual({ putWrites: 3, put: 1 });
  });
});
