"""ResNet-50 (bottleneck blocks of 3, 4, 6 and 3; widths 64-512, expansion 4) on one 224x224
image, as in the original paper's configuration; weights on PyTorch's meta device. The
importer merges identical convolutions, so the description lists ResNet-50's distinct
convolutions with their counts.

    python3 -m tessel.from_torch examples/models/resnet50.py --model net --example image \\
        --name resnet50 --out examples/models/resnet50.json
"""

import torch
import torch.nn as nn

META = torch.device("meta")


def conv(c_in, c_out, k, stride=1):
    return nn.Conv2d(c_in, c_out, k, stride=stride, padding=k // 2, bias=False, device=META)


class Bottleneck(nn.Module):
    def __init__(self, c_in, width, stride):
        super().__init__()
        self.conv1 = conv(c_in, width, 1)
        self.conv2 = conv(width, width, 3, stride)
        self.conv3 = conv(width, 4 * width, 1)
        self.bn1, self.bn2 = nn.BatchNorm2d(width, device=META), nn.BatchNorm2d(width, device=META)
        self.bn3 = nn.BatchNorm2d(4 * width, device=META)
        self.down = None
        if stride != 1 or c_in != 4 * width:
            self.down = nn.Sequential(conv(c_in, 4 * width, 1, stride),
                                      nn.BatchNorm2d(4 * width, device=META))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return torch.relu(y + (self.down(x) if self.down is not None else x))


class ResNet50(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = conv(3, 64, 7, 2)
        self.bn = nn.BatchNorm2d(64, device=META)
        self.pool = nn.MaxPool2d(3, 2, 1)
        blocks, c_in = [], 64
        for width, count, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(count):
                blocks.append(Bottleneck(c_in, width, stride if i == 0 else 1))
                c_in = 4 * width
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(2048, 1000, device=META)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn(self.stem(x))))
        x = self.blocks(x).mean((2, 3))
        return self.fc(x)


net = ResNet50()
image = torch.empty(1, 3, 224, 224, device=META)
