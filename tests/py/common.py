"""What the client scripts share: the one-line checks, the `openai` client on a server, and the
weather tool they offer."""
import openai


def check(name, cond, detail=""):
    """Asserts `cond` (the message names the check and shows `detail`) and prints one line."""
    assert cond, f"{name}: {detail}"
    print(f"ok {name}")


def openai_client(base, timeout):
    """The official client on `weft serve` at `base`: no retries, so a failure shows at once."""
    return openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=timeout)


def weather_tool(required):
    """The `get_weather(city, unit)` function tool; `required` lists its required parameters."""
    return {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a given city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "The city name, e.g. Paris"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": required,
            },
        },
    }
