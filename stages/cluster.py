"""Stage `cluster`: unsupervised clustering of the training boards' given-cell images.

`cluster.method` names a clusterer of satground.clustering: selflabel (images only, the
default), peers, umap or spectral (training-free embeddings of the images' neighbourhood graph +
k-means, satground/clustering/manifold.py), or infogan (the paper's; trained, checkpointed). `peers` and
restarts > 1 read the Sudoku rules, so they need `rule_aware: true`.

`cluster.restarts` runs the method that many times (cluster seeds seed, seed+1, ...): InfoGAN's
outcome depends on its seed (the paper reports 4 failures in 10). `cluster.restart_choice` keeps
one, reading no label: `peers`, the fewest peer conflicts (the share of image pairs shown in peer
given cells, same row, column or box of a training board, that it puts in one cluster: reads the
Sudoku rules); `agreement`, the run whose clusters of the training images agree most with the
other runs' (mean adjusted Rand index); `information`, InfoGAN's code information on the training
images. The peer structure is built only where it is used (the peers method, or the peers
choice): an image-only method (selflabel, umap, spectral, infogan) otherwise never reads the boards.

Trains only on the images shown in given cells of data/prepared/train.pt, never on labels;
`cluster.fit_images` fits on a seeded draw of them (every image is assigned all the same); the
training-side figures (the largest cluster's share, peer conflicts, and so a `peers` restart
choice) are then those of the drawn images.
The clustering accuracy is reported on the dev boards' given-cell images (dev_truth.pt,
"image_labels"); without that file training runs identically, unreported. No truth of the
training or test images is read. Writes
models/cluster/final.pt, and for a trained method models/cluster/epoch_{e:03d}.pt every
`checkpoint_every` epochs (epoch 0 = the untrained init, for the ablation), all of the kept run;
the dev clustering accuracy as its metric (per-epoch curves for a trained method, each
restart's under restart_<r>/ when there are several) and plots/cluster_{samples,confusion}.png.
"""
import time
from pathlib import Path

from satground.boards.data import load_given_images, load_image_labels, peer_cannot_links
from satground.boards.metrics import format_accuracy
from satground.boards.plots import plot_confusion, plot_samples
from satground.clustering import CLUSTERERS
from satground.clustering.fitting import Pools, fit_restarts, fit_sample
from satground.harness.io import atomic_directory, save_figure
from satground.harness.params import load_params
from satground.harness.stage import run_stage, stage_arguments, stage_device
from satground.harness.tracking import StageReport


def main(argv=None):
    args = stage_arguments(__doc__, ["prepared", "model-out", "samples-plot-out", "confusion-plot-out",
                                     "metrics-out"], argv)

    params = load_params(args.params)
    cfg = params.cluster
    train_images, train_idx, train_boards = load_given_images(args.prepared, "train")
    K = train_boards.n_digits
    dev_images, dev_idx, _ = load_given_images(args.prepared, "dev", K)
    reads_peers = CLUSTERERS[cfg.method].reads_peers or (cfg.restarts > 1 and cfg.restart_choice == "peers")
    fitted = fit_sample(len(train_images), cfg.fit_images, cfg.seed)
    pools = Pools(train_images[fitted], dev_images,
                  load_image_labels(args.prepared, "dev", dev_idx),  # reporting only: None when absent
                  cfg.n_clusters(K), K, peer_cannot_links(train_boards, train_idx[fitted]) if reads_peers else None)

    # a fresh folder that replaces models/cluster/ whole: no file of an earlier run survives
    report = StageReport(args.metrics_out)
    start = time.perf_counter()
    with atomic_directory(args.model_out) as out:
        clusterer, history, runs, kept = fit_restarts(cfg, pools, out, report, params.source)
    seconds = time.perf_counter() - start

    save_figure(plot_samples(*clusterer.sample_grid(train_images)), args.samples_plot_out)
    save_figure(plot_confusion(clusterer.assign(dev_images), pools.dev_labels, pools.n_clusters,
                               "dev images", K), args.confusion_plot_out)

    trained = [row for row in history if row["epoch"] > 0]
    timed = [row["seconds"] for row in trained]
    counts = clusterer.parameter_counts()
    info = {
        "method": cfg.method, "seed": kept["seed"], "epochs": trained[-1]["epoch"] if trained else 0,
        "n_clusters": pools.n_clusters, "n_train_images": len(train_images),
        "n_fit_images": len(pools.train_images), "n_dev_images": len(dev_images),
        "dev_accuracy": kept["dev_accuracy"],
        "train_largest_cluster": kept["train_largest_cluster"], "peer_conflicts": kept["peer_conflicts"],
        "code_information": kept["code_information"], "restart_choice": cfg.restart_choice,
        **{name: trained[-1].get(name) for name in ("loss_d", "loss_g", "loss_q_cat", "loss_q_cont") if trained},
        "parameters": counts["total"], "parameters_classifier_path": counts["classifier_path"],
        "device": str(stage_device()) if history else "cpu",
        "restarts": runs,
    }
    report.finish({"cluster_dev_accuracy": kept["dev_accuracy"]}, info, fit_seconds=round(seconds, 2),
                  seconds_per_epoch=round(sum(timed) / len(timed), 2) if timed else None)

    chosen = (f", kept seed {kept['seed']} of {cfg.restarts} (restart_choice: {cfg.restart_choice})"
              if cfg.restarts > 1 else "")
    print(f"cluster: {cfg.method} K={pools.n_clusters} fit on {len(pools.train_images)} of {len(train_images)} given-cell images{chosen}, clustering accuracy (dev images) "
          f"{format_accuracy(kept['dev_accuracy'])} "
          f"-> {Path(args.model_out) / 'final.pt'} ({seconds:.1f} s)")


if __name__ == "__main__":
    run_stage(main)
