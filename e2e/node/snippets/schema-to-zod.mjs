// Build the client's zod schema from the contract contractd enforces:
// GET /v1/models/{route} (models.retrieve) returns it, json-schema-to-zod
// (pinned) writes it as zod source. Run it at build time and commit the
// module; the route's contract sha256 says when to run it again.
import { jsonSchemaToZod, parseSchema } from 'json-schema-to-zod';

export async function routeContract(client, route) {
  const model = await client.models.retrieve(route); // GET /v1/models/{route}
  return model.contract; // { name, sha256, schema }; null on a passthrough route
}

const OPTIONAL = Symbol('optional');

// Tag each property its object leaves out of `required`.
function tagOptional(node) {
  if (Array.isArray(node)) return node.map(tagOptional);
  if (node === null || typeof node !== 'object') return node;
  const out = Object.fromEntries(Object.entries(node).map(([k, v]) => [k, tagOptional(v)]));
  if (out.properties && typeof out.properties === 'object') {
    const required = Array.isArray(out.required) ? out.required : [];
    for (const [name, prop] of Object.entries(out.properties)) {
      if (!required.includes(name) && prop && typeof prop === 'object') out.properties[name] = { ...prop, [OPTIONAL]: true };
    }
  }
  return out;
}

// zodModule returns an ES module exporting `name`, the schema as zod. The
// official SDK's zodResponseFormat/zodTextFormat send a strict JSON Schema
// (every property required), so an optional property must be .nullish():
// json-schema-to-zod writes .optional(), which the SDK refuses, and the
// override below makes it .nullable().optional(), the same as .nullish().
export function zodModule(schema, name) {
  return jsonSchemaToZod(tagOptional(schema), {
    module: 'esm',
    name,
    parserOverride(node, refs) {
      if (!node[OPTIONAL]) return undefined;
      const { [OPTIONAL]: _, ...rest } = node;
      return `${parseSchema(rest, refs)}.nullable()`;
    },
  });
}
