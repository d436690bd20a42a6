"""Models for scripts/parity/hybridbn_fbn.py (a module of their own: the authors' main loop pickles the model).

``SimpleCNN28``: HBN's Simple-CNN (HybridBN FedBaseline/models/Nets.py SimpleCNN; HBN Table 7)
adapted to 1x28x28 exactly as fedbn-bench's ``model=simple_cnn`` adapts it: first conv takes 1
channel, pools use ceil_mode=True (28 -> 14 -> 7 -> 4, flat 64*4*4 = 1024, the same FC(1024,128)
as the original on 32x32). Their SimpleCNN hard-codes 3 input channels and view(-1, 1024) with
floor pooling (28 -> 3, flat 576), so it cannot take Fashion-MNIST unmodified.
Layer order and registration order follow fedbn-bench's simple_cnn (conv, BN, ReLU, pool) x 3,
fc, ReLU, head. BN layers are nn.BatchNorm2d here; the wrapper swaps them for the authors'
FederatedBatchNorm with their own replace_bn_with_fbn().
"""
import torch
from torch import nn


class SimpleCNN28(nn.Module):
    def __init__(self, in_ch=1, num_classes=10, hw=28):
        super().__init__()
        layers, cin = [], in_ch
        for cout in (16, 32, 64):
            layers += [nn.Conv2d(cin, cout, 3, 1, 1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2, 2, ceil_mode=True)]
            cin = cout
        layers.append(nn.Flatten(1))
        self.features = nn.Sequential(*layers)
        with torch.no_grad():
            flat = self.features.eval()(torch.zeros(2, in_ch, hw, hw)).shape[1]
        self.features.train()
        self.fc = nn.Linear(flat, 128)
        self.relu = nn.ReLU()
        self.head = nn.Linear(128, num_classes)

    def forward(self, x):
        return self.head(self.relu(self.fc(self.features(x))))

