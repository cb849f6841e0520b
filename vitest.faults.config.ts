import { defineConfig } from "vitest/config";
// The enumerated crash-point suite (npm run test:faults): SIGKILLed child processes, minutes long.
export default defineConfig({
  test: {
    include: ["test/faults/**/*.faults.ts"],
    testTimeout: 1_800_000,
    hookTimeout: 120_000,
    pool: "forks",
    // child bundles and an initialised embedded data directory (test/setup/global.ts)
    globalSetup: ["test/setup/global.ts"],
  },
});
