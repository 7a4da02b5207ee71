"""Stage `curves`: dvc.yaml's per-epoch plots as one PNG, readable offline.

`dvc plots show` draws the same curves as interactive charts, but its HTML fetches the chart
library from the network; this figure (declared in dvc.yaml's plots too) shows them anywhere.
"""
from satground.harness.stage import run_stage, stage_arguments
from satground.harness.io import save_figure
from satground.harness.tracking import plot_curves


def main(argv=None):
    args = stage_arguments(__doc__, ["dvcyaml", "plot-out"], argv, params=False)
    save_figure(plot_curves(args.dvcyaml), args.plot_out)
    print(f"curves: the per-epoch plots of {args.dvcyaml} -> {args.plot_out}")


if __name__ == "__main__":
    run_stage(main)
