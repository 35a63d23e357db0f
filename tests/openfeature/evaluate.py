"""Evaluates flags through the official OpenFeature Python SDK and its OFREP provider.

usage: evaluate.py BASE_URL CASES_JSON
CASES_JSON holds [{"flag": KEY, "targetingKey": USER or null}, ...]; prints one JSON line per case
with the SDK's evaluation details (value, variant, reason, error_code, flag_metadata).
"""

import json
import sys
from concurrent.futures import ThreadPoolExecutor

from openfeature import api
from openfeature.contrib.provider.ofrep import OFREPProvider
from openfeature.evaluation_context import EvaluationContext


def main() -> None:
    base_url, cases_path = sys.argv[1], sys.argv[2]
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    api.set_provider(OFREPProvider(base_url=base_url))
    client = api.get_client()

    def evaluate(case: dict) -> str:
        key = case.get("targetingKey")
        context = EvaluationContext(targeting_key=key) if key is not None else EvaluationContext()
        details = client.get_string_details(case["flag"], "no-colour", context)
        reason = getattr(details.reason, "value", details.reason)
        return json.dumps(
            {
                "value": details.value,
                "variant": details.variant,
                "reason": str(reason),
                "error_code": details.error_code.value if details.error_code else None,
                "metadata": dict(details.flag_metadata or {}),
            }
        )

    # Like a web application: several threads evaluating at once, through one provider.
    with ThreadPoolExecutor(max_workers=8) as pool:
        out = list(pool.map(evaluate, cases))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
