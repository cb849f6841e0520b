/**
 * The console imports the API's wire types from src/api/schemas.ts (type-only: esbuild drops
 * them), and the type checker reads the server modules those schemas reach. The few Node globals
 * their signatures mention are declared here, opaque, so the console keeps `types: []` (no Node
 * API for browser code) while the server's shapes stay the console's. Console code must not use
 * them: nothing provides them in the browser.
 */
declare namespace NodeJS {
  interface ProcessEnv {
    [key: string]: string | undefined;
  }
}
declare const process: { readonly env: NodeJS.ProcessEnv };
declare function setImmediate(callback: () => void): unknown;
declare const Buffer: { byteLength(s: string, encoding?: string): number };
