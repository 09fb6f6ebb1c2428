# SPDX-License-Identifier: MIT
"""tests/oracle/torch_zoo.py - the model zoo's own architectures (mlp, lenet,
resnet8, resnet20) written the PyTorch way, with the parameter and buffer
names of torchvision and of Tandem's zoo. The oracle's reference numbers
(make_reference.py) and the zoo's name check (tests/test-zoo-names.py) both
build their models here. Needs torch."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Mlp(nn.Module):
    def __init__(self, c, hw, k):
        super().__init__()
        self.fc1 = nn.Linear(c * hw * hw, 512)
        self.fc2 = nn.Linear(512, 256)
        self.fc3 = nn.Linear(256, k)

    def forward(self, x):
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class LeNet(nn.Module):
    def __init__(self, c, hw, k):
        super().__init__()
        self.conv1 = nn.Conv2d(c, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        s = ((hw // 2) - 4) // 2
        self.fc1 = nn.Linear(16 * s * s, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, k)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2, 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False),
                nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        short = x if self.downsample is None else self.downsample(x)
        return F.relu(out + short)


class CifarResNet(nn.Module):
    def __init__(self, c, k, blocks):
        super().__init__()
        self.conv1 = nn.Conv2d(c, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16, eps=1e-5, momentum=0.1)
        cin = 16
        for i, (cout, stride) in enumerate(((16, 1), (32, 2), (64, 2))):
            layer = []
            for b in range(blocks):
                layer.append(BasicBlock(cin, cout, stride if b == 0 else 1))
                cin = cout
            setattr(self, "layer%d" % (i + 1), nn.Sequential(*layer))
        self.fc = nn.Linear(64, k)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


def zoo_model(name, c, size, classes):
    """The zoo model `name` for c-channel size x size images and `classes`
    classes, or None when the zoo's own list does not have it."""
    if name == "mlp":
        return Mlp(c, size, classes)
    if name == "lenet":
        return LeNet(c, size, classes)
    if name == "resnet8":
        return CifarResNet(c, classes, 1)
    if name == "resnet20":
        return CifarResNet(c, classes, 3)
    return None
