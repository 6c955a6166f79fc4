"""`openloop eval`: run a dataset of cases as real tasks and check what each task did.

`dataset` reads and validates the cases, `runner` starts them on the stack and drives their
approvals, `facts` reads what a finished task did (through the task export's readers),
`checks` and `judge` decide each check, `report` and `junit` tell the result, `store` keeps
the runs for the dashboard, `capture` turns a finished task into a case.
"""
