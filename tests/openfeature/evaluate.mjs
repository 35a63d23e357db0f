// Evaluates flags through the OpenFeature JavaScript server SDK and the OFREP provider (npm).
//
// usage: node evaluate.mjs BASE_URL CASES_JSON
// CASES_JSON holds [{"flag": KEY, "targetingKey": USER or null}, ...]; prints one JSON line per
// case with the SDK's evaluation details (value, variant, reason, errorCode, flagMetadata).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

// The packages live in the directory given by TIDEGATE_OFREP_JS (scripts/openfeature-sdks.sh).
const require = createRequire(`${process.env.TIDEGATE_OFREP_JS}/node_modules/`);
const { OpenFeature } = require('@openfeature/server-sdk');
const { OFREPProvider } = require('@openfeature/ofrep-provider');

const [baseUrl, casesPath] = process.argv.slice(2);
const cases = JSON.parse(readFileSync(casesPath, 'utf8'));
await OpenFeature.setProviderAndWait(new OFREPProvider({ baseUrl }));
const client = OpenFeature.getClient();
const evaluate = async (c) => {
  const context = c.targetingKey === null ? {} : { targetingKey: c.targetingKey };
  const d = await client.getStringDetails(c.flag, 'no-colour', context);
  return JSON.stringify({
    value: d.value,
    variant: d.variant ?? null,
    reason: d.reason ?? null,
    error_code: d.errorCode ?? null,
    metadata: d.flagMetadata ?? {},
  });
};
// Like a server handling requests: up to 32 evaluations in flight at once, answers in order.
const lines = [];
for (let i = 0; i < cases.length; i += 32) {
  lines.push(...(await Promise.all(cases.slice(i, i + 32).map(evaluate))));
}
process.stdout.write(lines.join('\n') + '\n');
await OpenFeature.close();
