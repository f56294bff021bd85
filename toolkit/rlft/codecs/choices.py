"""The values a codec setting takes, in a module that imports nothing: a command's config (a light module the CLI
imports to build its options) declares its choices from these, and the codecs check against the same tuples."""

FORMATS = ("raw", "discretized", "tokenized", "binned")  # the numeric codecs (rlft data serialize --format)
EDGE_SOURCES = ("data", "bounds")  # discretized, binned: bin edges from the data's quantiles or the space's bounds
WORDINGS = ("gemma", "compact", "position")  # the FrozenLake grid codec's prompts (rlft data export-q --wording)
SEPARATORS = (" ", ",")  # between the values of an observation or action
PROMPT_STYLES = ("plain", "chat")  # one string with tags, or system + user messages
# what the rlft4rl profile fixes (RLFT4RL's format): serialize refuses another value given beside it
RLFT4RL_FIXED = {"precision": 5, "separator": ",", "prompt_style": "plain"}
