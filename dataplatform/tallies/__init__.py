"""Kept figures: the counts and sums that pages show (claims by state, cases by grade, agreement tables), kept up
to date by the services that change them, in the same transaction, so a page reads a few rows instead of recounting
the project.

A workflow defines each tally once (`registry.define`: its name, the tables it counts and its recount), and its
services call `services.add` after each change. The first read of a project's tally counts it (under a lock that
lets no change slip between the count and the first `add`), so there is no data migration to write; the recount
also proves the kept figures in tests and repairs them (`manage.py recount_tallies`)."""
