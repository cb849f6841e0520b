#!/usr/bin/env node
/** `toolchain` (src/cli/bin.js runs this file through tsx; `npx toolchain`): the command line of src/cli/program.ts on process.argv. */
import { Exit } from "./exit.js";
import { runCli } from "./program.js";

runCli(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e) => {
    console.error(e);
    process.exit(Exit.failed);
  },
);
