/**
 * OpenAI's documented rules for strict structured outputs (`response_format: { type: "json_schema",
 * json_schema: { strict: true, schema } }`, "Supported schemas" in the Structured Outputs guide),
 * as a checker: the schema the scripted server received either passes or gets the list of
 * violations OpenAI would answer HTTP 400 for. Independent of the code under test on purpose.
 *
 * - root: an object schema, not `anyOf`;
 * - every object: `additionalProperties: false`, every property listed in `required`;
 * - types: string, number, boolean, integer, object, array, null (also as a type list), enum,
 *   const, anyOf (nested), $ref / $defs;
 * - keywords: string pattern, format (a fixed list); number multipleOf, maximum, exclusiveMaximum,
 *   minimum, exclusiveMinimum; array items, minItems, maxItems; plus description / title.
 *   Not supported: allOf, not, if/then/else, dependentRequired, dependentSchemas, patternProperties,
 *   propertyNames, unevaluatedProperties, minProperties, maxProperties, minLength, maxLength (refused
 *   by older models and fine-tuned ones), default, uniqueItems, contains, prefixItems;
 * - limits: at most 5,000 object properties, 10 levels of object nesting, 1,000 enum values,
 *   120,000 characters of property names, definition names, enum and const values; a string enum of
 *   more than 250 values at most 15,000 characters.
 */

const KEYWORDS = new Set([
  "type",
  "description",
  "title",
  "enum",
  "const",
  "anyOf",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "$ref",
  "$defs",
  "pattern",
  "format",
  "multipleOf",
  "maximum",
  "exclusiveMaximum",
  "minimum",
  "exclusiveMinimum",
  "minItems",
  "maxItems",
]);
const TYPES = new Set(["string", "number", "boolean", "integer", "object", "array", "null"]);
const FORMATS = new Set(["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"]);

const isObject = (v: unknown): v is Record<string, any> => typeof v === "object" && v !== null && !Array.isArray(v);

export function strictViolations(root: unknown): string[] {
  const out: string[] = [];
  let properties = 0;
  let enumValues = 0;
  let chars = 0;
  if (!isObject(root)) return ["the schema is not an object"];
  if (root.anyOf) out.push("root: anyOf is not allowed at the root");
  if (root.type !== "object") out.push(`root: must be type "object", got ${JSON.stringify(root.type)}`);
  const walk = (s: unknown, at: string, objectDepth: number): void => {
    if (!isObject(s)) {
      out.push(`${at}: a schema must be an object`);
      return;
    }
    for (const k of Object.keys(s)) if (!KEYWORDS.has(k)) out.push(`${at}: keyword "${k}" is not supported`);
    const types = s.type === undefined ? [] : Array.isArray(s.type) ? s.type : [s.type];
    for (const t of types) if (!TYPES.has(t)) out.push(`${at}: type ${JSON.stringify(t)} is not supported`);
    if (s.type === undefined && !s.anyOf && !s.$ref && s.enum === undefined && s.const === undefined)
      out.push(`${at}: no type`);
    if (s.format !== undefined && !FORMATS.has(s.format)) out.push(`${at}: format "${s.format}" is not supported`);
    if (Array.isArray(s.enum)) {
      enumValues += s.enum.length;
      const strings = s.enum.filter((e: unknown) => typeof e === "string") as string[];
      const len = strings.reduce((n, e) => n + e.length, 0);
      chars += len;
      if (strings.length > 250 && len > 15_000)
        out.push(`${at}: a string enum of more than 250 values exceeds 15,000 characters`);
    }
    if (typeof s.const === "string") chars += s.const.length;
    if (Array.isArray(s.anyOf)) s.anyOf.forEach((x: unknown, i: number) => walk(x, `${at}.anyOf.${i}`, objectDepth));
    if (isObject(s.$defs)) {
      for (const [k, x] of Object.entries(s.$defs)) {
        chars += k.length;
        walk(x, `${at}.$defs.${k}`, objectDepth);
      }
    }
    if (types.includes("object") || s.properties !== undefined) {
      const depth = objectDepth + 1;
      if (depth > 10) out.push(`${at}: more than 10 levels of object nesting`);
      if (s.additionalProperties !== false) out.push(`${at}: additionalProperties must be false`);
      const props = isObject(s.properties) ? s.properties : {};
      const required = Array.isArray(s.required) ? s.required : [];
      for (const k of Object.keys(props)) {
        properties++;
        chars += k.length;
        if (!required.includes(k)) out.push(`${at}: property "${k}" is not in required`);
        walk(props[k], `${at}.properties.${k}`, depth);
      }
      for (const r of required) if (!(r in props)) out.push(`${at}: required "${r}" is not a property`);
    }
    if (types.includes("array")) {
      if (s.items === undefined) out.push(`${at}: an array needs items`);
      else walk(s.items, `${at}.items`, objectDepth);
    }
  };
  walk(root, "schema", 0);
  if (properties > 5_000) out.push(`more than 5,000 object properties (${properties})`);
  if (enumValues > 1_000) out.push(`more than 1,000 enum values (${enumValues})`);
  if (chars > 120_000) out.push(`more than 120,000 characters of names and enum values (${chars})`);
  return out;
}
