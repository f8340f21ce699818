"""The last arrow of the pipeline: a ``LaunchPlan`` becomes running processes, then one exit
code. ``supervise`` drives the attempts, ``loop`` the events of one attempt, ``spawn`` starts a
process, ``signals`` turns signals into events, ``reaper`` outlives a killed launcher,
``output`` relays lines to the console, ``summary`` reports, ``preflight`` checks first."""
