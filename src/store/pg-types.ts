/**
 * Type parsers for this project's pools: pg's own, except `bytea[]` (OID 1001).
 *
 * LangGraph's PostgresSaver reads a checkpoint's channel blobs and pending writes as 2-D bytea
 * arrays (`array_agg(array[channel::bytea, type::bytea, blob])`). pg parses those through
 * postgres-array one character at a time and then hex-decodes each element: in a CPU profile of
 * a 1,000-step durable run, reading the final state cost ~40 µs per step. Postgres prints bytea
 * array elements in hex (`{{"\\x6162",NULL},…}`), whose quoted elements hold no quote or comma,
 * so this parser jumps from quote to quote and decodes each element with Buffer.from(hex).
 * Anything else (the `escape` bytea_output, a malformed value) goes to pg's own parser.
 */
import pg from "pg";

const BYTEA_ARRAY = 1001;
const getParser = pg.types.getTypeParser as unknown as (oid: number, format?: string) => (v: string) => unknown;
const standardByteaArray = getParser(BYTEA_ARRAY, "text");

type Nested = (Buffer | null | Nested)[];

/** `{{"\\x..",NULL},{..}}` (hex bytea elements) → nested arrays of Buffers; undefined if not that format. */
export function parseHexByteaArray(s: string): Nested | undefined {
  if (s[0] !== "{") return undefined;
  const root: Nested = [];
  const stack: Nested[] = [];
  let cur: Nested | undefined;
  let i = 0;
  const n = s.length;
  while (i < n) {
    const c = s.charCodeAt(i);
    if (c === 123 /* { */) {
      const a: Nested = [];
      if (cur) {
        cur.push(a);
        stack.push(cur);
      } else if (i !== 0) return undefined;
      cur = cur ? a : root;
      i++;
    } else if (c === 125 /* } */) {
      cur = stack.pop();
      i++;
    } else if (c === 44 /* , */) {
      i++;
    } else if (c === 34 /* " */) {
      // "\\x<hex>": two backslashes (the array escape of one), then x
      if (s.charCodeAt(i + 1) !== 92 || s.charCodeAt(i + 2) !== 92 || s.charCodeAt(i + 3) !== 120) return undefined;
      const end = s.indexOf('"', i + 4);
      if (end < 0 || !cur) return undefined;
      cur.push(Buffer.from(s.slice(i + 4, end), "hex"));
      i = end + 1;
    } else if (c === 78 /* N */ && s.startsWith("NULL", i) && cur) {
      cur.push(null);
      i += 4;
    } else {
      return undefined;
    }
  }
  return stack.length === 0 && cur === undefined ? root : undefined;
}

function byteaArray(v: string): unknown {
  return parseHexByteaArray(v) ?? standardByteaArray(v);
}

/** For `new pg.Pool({ types })`: pg's parsers, with the fast bytea[] one. */
export const poolTypes = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    if (oid === BYTEA_ARRAY && (format ?? "text") === "text") return byteaArray;
    return getParser(oid, format);
  },
};
