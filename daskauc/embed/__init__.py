"""Landmarks and feature maps: mini-batch k-means, k-means Nystroem, random Fourier features,
and centres for kernel-basis models."""

from .assign import nearest_centres
from .centres import Centres, kmeans_centres, select_centres, uniform_centres
from .fourier import RandomFourierFeatures
from .kmeans import MiniBatchKMeans, minibatch_kmeans
from .nystroem import (
    KMeansNystroem,
    NystroemRankWarning,
    default_gamma,
    gaussian_kernel,
    load_embedding_map,
)
from .seeding import kmeans_parallel, kmeans_plusplus

__all__ = [
    "Centres", "KMeansNystroem", "MiniBatchKMeans", "NystroemRankWarning", "RandomFourierFeatures",
    "default_gamma",
    "gaussian_kernel", "kmeans_centres", "kmeans_parallel", "kmeans_plusplus",
    "load_embedding_map", "minibatch_kmeans", "nearest_centres", "select_centres",
    "uniform_centres",
]
