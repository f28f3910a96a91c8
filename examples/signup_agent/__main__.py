"""``python -m examples.signup_agent``: print the scenario, section by section."""

from examples.signup_agent.scenario import main

main()
