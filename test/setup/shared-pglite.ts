/**
 * Every test file's process: in-memory embedded databases share one PGlite, a schema each
 * (src/store/db.ts, shareInMemoryEmbedded), started from the initdb image test/setup/global.ts
 * dumped. A fresh PGlite costs seconds of CPU (initdb in WASM); loading the image a fraction of
 * one, a schema in a running instance milliseconds. Data directories (child processes, the CLI)
 * are not affected.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { shareInMemoryEmbedded } from "../../src/store/db.js";

const image = process.env.TOOLCHAIN_TEST_PGLITE && path.join(process.env.TOOLCHAIN_TEST_PGLITE, "pglite-image.tar");
shareInMemoryEmbedded({ image: image && existsSync(image) ? image : undefined });

// Every drive in the suite also reads its final view from the checkpoint and fails when the view
// it built from the streamed state differs (src/runtime/driver.ts). Tests that count statements
// turn it off around their count.
process.env.TOOLCHAIN_CHECK_STREAMED_VIEW ??= "1";
