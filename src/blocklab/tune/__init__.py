"""`blocklab tune`: several knobs at once, a search that respects noise, a winner that holds.

space.py      the experiment's [knobs] as sets or ranges, its [tune] table, the budget
optimiser.py  Optuna's TPE through ask-and-tell: it proposes, blocklab measures
race.py       the race: blocks beside the incumbent and the default, family-wise paired drops
driver.py     the loop: rounds, the budget with restarts priced in, resume by replay
confirm.py    fresh blocks of winner, runner-up and default; the verdict's interval
session.py    from the experiment file to tune.json and the report
"""
