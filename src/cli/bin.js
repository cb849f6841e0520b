#!/usr/bin/env node
// `toolchain` (package.json "bin", so `npx toolchain …` works in a clone after `npm ci`).
// The CLI is TypeScript run without a build step: register tsx's loader in this process (what
// `node --import tsx` does), then load the entry. One process, so signals and exit codes are the CLI's own.
import "tsx";

await import("./main.ts");
