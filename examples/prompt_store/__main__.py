"""``python -m examples.prompt_store``: print the scenario, section by section."""

from examples.prompt_store.scenario import main

main()
