"""Fetch and verify a dataset into a data root, or print how to obtain it where no public download exists.

    python scripts/download_data.py NAME [--root DIR] [--timeout SECONDS]
    python scripts/download_data.py fashion_mnist --from /usr/share/datasets/fashion-mnist   (a local copy)
    python scripts/download_data.py abide --root DIR --abide-rois ROIS_DIR --abide-phenotype CSV

Public data (mnist, fashion_mnist, cifar10, cifar100, svhn, usps through torchvision, which checks
each archive's md5; tinyimagenet from its official URL, md5 90528d7c...) is downloaded and then
read once by its loader, which also builds the uint8 cache.  Data behind a registration or only
released by the FedBN authors (digits5, office_caltech10, domainnet, abide, imagenet) cannot be
fetched here: the script prints the manual steps and checks whether the files are in place.
``--from DIR`` installs MNIST or Fashion-MNIST from a folder of their four IDX files (plain or
``.gz``), e.g. Debian's package ``dataset-fashion-mnist`` (``apt-get install dataset-fashion-mnist``
puts them in ``/usr/share/datasets/fashion-mnist``): the way to get Fashion-MNIST on a machine that
reaches package registries but not the dataset's host. Exit status: 0 ready, 1 not (yet) in place or download failed.  An offline machine fails within
``--timeout`` seconds per connection attempt.
"""
from __future__ import annotations

import argparse
import os
import sys

from fedbn_bench.data import DatasetError, _files, load_dataset
from fedbn_bench.data.abide import build_site_files
from fedbn_bench.data.mnist import IDX_FOLDERS, install_idx_files

FEDBN = "https://github.com/med-air/FedBN (README, section 'Dataset & Pretrained Model')"

DOWNLOADABLE = ("mnist", "fashion_mnist", "cifar10", "cifar100", "svhn", "usps", "tinyimagenet")

MANUAL = {
    "digits5": """\
Digits-5 in FedBN's prepared format (no public checksum; the files are pickles, i.e. code: use a copy you trust).
  1. Download FedBN's digits dataset archive, linked from {fedbn}
     (or build it from the raw sources with FedBN's utils/data_preprocess.py).
  2. Unzip it so that these exist (<root> plays the role of FedBN's data/ folder):
       {root}/MNIST/partitions/train_part0.pkl ... train_part9.pkl, {root}/MNIST/test.pkl
       and the same for SVHN, USPS, SynthDigits, MNIST_M.""",
    "office_caltech10": """\
Office-Caltech10 as released with FedBN (no public checksum).
  1. Download FedBN's office_caltech_10 dataset archive, linked from {fedbn}.
  2. Unzip it into {root} so that {root}/office_caltech_10/amazon_train.pkl, ..._test.pkl (and caltech,
     dslr, webcam) and the image folders {root}/office_caltech_10/<site>/<class>/*.jpg exist.""",
    "domainnet": """\
DomainNet (FedBN's 10-class subset).
  1. Download FedBN's DomainNet split archive, linked from {fedbn}, and unzip it into {root}
     so that {root}/DomainNet/clipart_train.pkl, clipart_test.pkl, ... exist
     (or use DomainNet's own <site>_train.txt / <site>_test.txt lists in {root}/DomainNet).
  2. Download the six image zips (clipart, infograph, painting, quickdraw, real, sketch) from the
     DomainNet project page (Peng et al. 2019, http://ai.bu.edu/M3SDA/) and unzip each into {root}/DomainNet
     so that {root}/DomainNet/clipart/bird/*.jpg etc. exist.""",
    "abide": """\
ABIDE I (needs accepting the data usage terms of the ABIDE I Preprocessed release,
http://preprocessed-connectomes-project.org/abide/).
  1. Download the CPAC pipeline's Harvard-Oxford ROI series (derivative rois_ho, files
     <SITE>_<SUBID>_rois_ho.1D) for sites NYU, UM_1, USM, UCLA_1, and the phenotypic CSV.
  2. Build the connectome files (sliding windows of 32 frames, stride 1; FedBN App. D.4):
       python scripts/download_data.py abide --root {root} --abide-rois ROIS_DIR --abide-phenotype CSV
     which writes {root}/ABIDE/NYU.npz, UM.npz, USM.npz, UCLA.npz (add --abide-drop-column I
     for ROI columns beyond the atlas' 110).""",
    "imagenet": """\
ImageNet-1K (needs a registration at https://image-net.org).
  1. Download ILSVRC2012 train and validation images.
  2. Extract train into {root}/imagenet/train/<wnid>/*.JPEG and sort the validation images into
     {root}/imagenet/val/<wnid>/*.JPEG (one folder per class, as torchvision's ImageFolder expects).
  The first run decodes every image once into a uint8 cache under {root}/fedbn_cache
  (about 150 KB per image at image_size 224).""",
}


def check(name: str, root: str) -> int:
    try:
        bundle = load_dataset(name, root=root)
    except DatasetError as err:
        print(f"not ready: {err}")
        return 1
    print(f"ready: {name} under {root}: {len(bundle.train)} train / {len(bundle.test)} test samples, "
          f"input {tuple(bundle.input_shape)}, {bundle.num_classes} classes")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", choices=sorted((*DOWNLOADABLE, *MANUAL)))
    parser.add_argument("--root", default="data", help="data root (default: data)")
    parser.add_argument("--timeout", type=float, default=_files.DOWNLOAD_TIMEOUT, help="socket timeout in seconds")
    parser.add_argument("--from", dest="source", help="a local folder holding the IDX files (mnist, fashion_mnist)")
    parser.add_argument("--abide-rois", help="folder of ABIDE *_rois_ho.1D files (abide only)")
    parser.add_argument("--abide-phenotype", help="ABIDE phenotypic CSV (abide only)")
    parser.add_argument("--abide-drop-column", type=int, action="append", default=[], help="ROI column to drop (abide only)")
    args = parser.parse_args(argv)
    root = os.path.expanduser(args.root)
    _files.DOWNLOAD_TIMEOUT = args.timeout

    if args.source is not None:
        if args.name not in IDX_FOLDERS:
            parser.error(f"--from installs {' or '.join(IDX_FOLDERS)} from local IDX files, not {args.name}")
        try:
            for path in install_idx_files(args.name, args.source, root):
                print(f"wrote {path}")
        except (DatasetError, OSError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        return check(args.name, root)

    if args.name in DOWNLOADABLE:
        try:
            load_dataset(args.name, root=root, download=True)
        except DatasetError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        return check(args.name, root)

    if args.name == "abide" and (args.abide_rois or args.abide_phenotype):
        if not (args.abide_rois and args.abide_phenotype):
            parser.error("--abide-rois and --abide-phenotype go together")
        try:
            counts = build_site_files(args.abide_rois, args.abide_phenotype, os.path.join(root, "ABIDE"), args.abide_drop_column)
        except (DatasetError, OSError, ValueError, KeyError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        print("wrote " + ", ".join(f"{s}: {n} windows" for s, n in counts.items()))
        return check(args.name, root)

    print(MANUAL[args.name].format(root=root, fedbn=FEDBN))
    return check(args.name, root)


if __name__ == "__main__":
    sys.exit(main())
