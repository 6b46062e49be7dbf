"""`spinfc calibrate`: thresholds for a pack's categories and questions, chosen on a labelled file (docs/calibration.md).

    labels.py      the labelled file's label columns, matched to the pack's categories and questions
    thresholds.py  precision-recall curves, the threshold for a target, reliability bins
    report.py      the figures (matplotlib PNGs) and the HTML page
    options.py     the command line's flags (what `spinfc` builds at start-up)
    command.py     the command: score the file (spinfc score's job), choose, write the pack and the report
"""
