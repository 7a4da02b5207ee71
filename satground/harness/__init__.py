"""The harness every stage runs in, whatever it computes: parameters, the stage's command line
and errors, artifact files, resumable loops, metrics and curves, run records, console commands.

    params    every parameter: type, bounds, default, meaning; profiles composed over them
    stage     what every stage script shares: command line, output lock, device, errors
    io        atomic artifact writes, safe loading, seeding, device choice
    resume    resumable loops: a killed stage continues after its last finished epoch
    tracking  per-stage metrics files and per-epoch curves (dvclive)
    records   run records under results/: their format, read by the tables
    cli       console commands (satground-profile, satground-exps)
"""
