package contracts

// BenchSchema and BenchOutput are the engine benchmarks' fixture, shared by
// the internal (fast path) and external (engine vs library) benchmarks: a
// ClassifyLLMOutput-like schema with $defs, enums, bounds and
// additionalProperties false everywhere, and a valid ~1.5 KB output.
const BenchSchema = `{"type":"object","additionalProperties":false,
"required":["intents","primary_intent","product_line","urgency","risk_flags"],
"$defs":{"scored":{"type":"object","additionalProperties":false,"required":["label","confidence","evidence_snippets"],
  "properties":{"label":{"type":"string","enum":["claim_report","billing_question","complaint","other","motor","home","travel","low","normal","high","fraud_suspected","legal_threat","vulnerable_customer"]},
   "confidence":{"type":"number","minimum":0,"maximum":1},
   "evidence_snippets":{"type":"array","maxItems":5,"items":{"type":"string","minLength":1,"maxLength":200}}}}},
"properties":{
 "intents":{"type":"array","minItems":1,"maxItems":5,"items":{"$ref":"#/$defs/scored"}},
 "primary_intent":{"type":"string","enum":["claim_report","billing_question","complaint","other"]},
 "product_line":{"$ref":"#/$defs/scored"},
 "urgency":{"$ref":"#/$defs/scored"},
 "risk_flags":{"type":"array","maxItems":5,"items":{"$ref":"#/$defs/scored"}}}}`

const BenchOutput = `{"intents":[{"label":"claim_report","confidence":0.92,"evidence_snippets":["my kitchen window broke during the storm last night","I would like to file a claim"]},{"label":"billing_question","confidence":0.41,"evidence_snippets":["Also why was my premium higher this month"]}],"primary_intent":"claim_report","product_line":{"label":"home","confidence":0.88,"evidence_snippets":["my kitchen window broke during the storm last night","policy number HX-2291-7730"]},"urgency":{"label":"high","confidence":0.77,"evidence_snippets":["rain is coming in and the children sleep next door","Please send someone today"]},"risk_flags":[{"label":"vulnerable_customer","confidence":0.55,"evidence_snippets":["rain is coming in and the children sleep next door"]},{"label":"legal_threat","confidence":0.12,"evidence_snippets":["I will talk to my lawyer if nothing happens"]}]}`
