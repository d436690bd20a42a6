"""The recipes, one module per kind of output; importing this package registers them all."""
from fedbn_bench.figures.recipes import curve, fbn_byzantine, fbn_fig3a, fedrbn_table, hbn_table, paper_table  # noqa: F401
from fedbn_bench.figures.recipes import bn_pca, grid, partition_heatmap, toys  # noqa: F401
