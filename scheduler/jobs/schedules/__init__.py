"""Schedules, one concern a module: what a job's schedule text means and
when it falls (docs/design.md §3). `scheduler.jobs.cron` is their public face.

- errors: ScheduleError, the message a person reads.
- schedule: the parsed Schedule and its day matching (Quartz L, W, #).
- fields: the five cron fields and the Quartz day forms.
- hashed: Jenkins' H forms, seeded by the job's name.
- business_day: `@business_day N HH:MM`, its days and its instants.
- parsing: text (cron, macros, `@every`, `@business_day`) to Schedule.
- wall_time: the next instant of a cron schedule, DST-correct.
- union: a job's several schedules, one-shot instants and bounds (Timing).
"""
