"""The grounding's map of clusters onto symbols, scored on the dev images (issue 68, item 2).

    python studies/cluster_map.py --prepared data/prepared --classifier models/classifier.pt \
        --permutation models/permutation.json [--out map.json]

The map was learnt without any label (the `ground` stage). Here the dev images' truth scores it,
for the report only, as `cluster` scores its clustering. With K' clusters onto K symbols the best
onto map is the reference (`best_matching`). Prints, and with --out writes as JSON:
- each cluster's dev images, the symbol the learnt map gives it and the reference's;
- the dev images read right through each map;
- how many clusters the learnt map sends where the reference does.
Symbols are 1-based, as in the permutation file's `cluster_to_digit`.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prepared", type=Path, required=True, help="a run's data/prepared folder")
    parser.add_argument("--classifier", type=Path, required=True, help="the run's models/classifier.pt")
    parser.add_argument("--permutation", type=Path, required=True, help="the run's models/permutation.json")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import numpy as np

    from satground.boards.data import given_image_indices, load_boards, load_image_labels
    from satground.boards.metrics import best_matching, clustering_accuracy
    from satground.readers.classifier import load_classifier
    from satground.readers.lenet import predict
    from satground.solver.grounding import load_permutation

    dev = load_boards(args.prepared, "dev")
    learnt = load_permutation(args.permutation, dev.n_digits)["permutation"].numpy()
    n_clusters = len(learnt)
    pool = given_image_indices(dev)
    clusters = predict(load_classifier(args.classifier, n_clusters), dev.images[pool]).numpy()
    symbols = load_image_labels(args.prepared, "dev", pool).numpy()  # 0-based; reporting only
    reference = best_matching(clusters, symbols, n_clusters, dev.n_digits)
    sizes = np.bincount(clusters, minlength=n_clusters)
    used = sizes > 0
    out = {
        "clusters": [{"cluster": c, "dev_images": int(sizes[c]), "learnt": int(learnt[c]) + 1,
                      "reference": int(reference[c]) + 1} for c in range(n_clusters)],
        "dev_images_right_learnt_map": float((learnt[clusters] == symbols).mean()),
        "dev_images_right_reference_map": clustering_accuracy(clusters, symbols, n_clusters, dev.n_digits),
        "clusters_mapped_as_reference": f"{int((learnt == reference)[used].sum())} of {int(used.sum())}",
    }
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
