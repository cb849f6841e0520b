import { defineConfig } from "vitest/config";
/**
 * `npm test`. What keeps it in minutes on two cores (README, "npm test"):
 * - globalSetup builds, once per run, the children's bundles and an initialised embedded database
 *   (test/setup/global.ts);
 * - in-memory embedded databases share one PGlite per worker process, a schema each
 *   (test/setup/shared-pglite.ts);
 * - workers are reused across files (isolate: false): the runtime's dependencies (LangGraph,
 *   LangChain, zod, the MCP SDK) load once per worker instead of once per file, seconds each;
 * - more workers than cores: most files wait on child processes, timers and sockets, not the CPU.
 */
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    isolate: false,
    maxWorkers: Number(process.env.TEST_WORKERS ?? 4),
    globalSetup: ["test/setup/global.ts"],
    setupFiles: ["test/setup/shared-pglite.ts"],
  },
});
