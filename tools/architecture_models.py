"""Published image-model architectures, written here from their papers' configurations
(dev-only: imports torch; used by tools/export_architectures.py).

MobileNetV3-small (Howard et al. 2019, Table 2; the layout torchvision builds), ResNet-18
(He et al. 2016, BasicBlock [2, 2, 2, 2]) and a ViT (Dosovitskiy et al. 2020: class token,
learned positions, pre-norm blocks with exact GELU). Widths, resolution and class count are
parameters so a committed fixture can be small; `init_weights` gives every parameter and
batch-norm statistic seeded, non-trivial values.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


def make_divisible(v: float, divisor: int = 8) -> int:
    """Round a channel count to a multiple of `divisor`, never below 90% of `v` (MobileNet)."""
    out = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return out + divisor if out < 0.9 * v else out


def conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1,
            act: type[nn.Module] | None = None) -> nn.Sequential:
    """Conv2d (no bias, 'same' padding) + BatchNorm2d [+ activation]."""
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class SqueezeExcitation(nn.Module):
    """x * hardsigmoid(fc2(relu(fc1(mean over H, W of x)))), the fcs as 1x1 convs."""

    def __init__(self, channels: int, squeeze: int) -> None:
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = F.adaptive_avg_pool2d(x, 1)  # (n, c, 1, 1)
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))


@dataclass(frozen=True)
class Bneck:
    """One MobileNetV3 bottleneck row: kernel, expanded and output channels, SE, act, stride."""

    kernel: int
    expanded: int
    out: int
    se: bool
    hardswish: bool
    stride: int


# MobileNetV3-small's bottlenecks (paper Table 2), input channels 16 after the stem.
MOBILENET_V3_SMALL = (
    Bneck(3, 16, 16, True, False, 2),
    Bneck(3, 72, 24, False, False, 2),
    Bneck(3, 88, 24, False, False, 1),
    Bneck(5, 96, 40, True, True, 2),
    Bneck(5, 240, 40, True, True, 1),
    Bneck(5, 240, 40, True, True, 1),
    Bneck(5, 120, 48, True, True, 1),
    Bneck(5, 144, 48, True, True, 1),
    Bneck(5, 288, 96, True, True, 2),
    Bneck(5, 576, 96, True, True, 1),
    Bneck(5, 576, 96, True, True, 1),
)


class InvertedResidual(nn.Module):
    """Expand (1x1) -> depthwise (k x k, stride) -> [SE] -> project (1x1), + x when shapes keep."""

    def __init__(self, cin: int, row: Bneck, width: float) -> None:
        super().__init__()
        expanded, out = make_divisible(row.expanded * width), make_divisible(row.out * width)
        act = nn.Hardswish if row.hardswish else nn.ReLU
        layers: list[nn.Module] = []
        if expanded != cin:
            layers.append(conv_bn(cin, expanded, 1, act=act))
        layers.append(conv_bn(expanded, expanded, row.kernel, row.stride, groups=expanded, act=act))
        if row.se:
            layers.append(SqueezeExcitation(expanded, make_divisible(expanded // 4)))
        layers.append(conv_bn(expanded, out, 1))
        self.block = nn.Sequential(*layers)
        self.residual = row.stride == 1 and cin == out
        self.out_channels = out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.residual else y


class MobileNetV3Small(nn.Module):
    """(n, 3, H, W) -> (n, classes) logits; `width` scales every channel count (1.0 = paper)."""

    def __init__(self, width: float = 1.0, classes: int = 1000, last_channel: int = 1024) -> None:
        super().__init__()
        cin = make_divisible(16 * width)
        layers: list[nn.Module] = [conv_bn(3, cin, 3, 2, act=nn.Hardswish)]
        for row in MOBILENET_V3_SMALL:
            block = InvertedResidual(cin, row, width)
            layers.append(block)
            cin = block.out_channels
        last_conv = 6 * cin
        layers.append(conv_bn(cin, last_conv, 1, act=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        hidden = make_divisible(last_channel * width)
        self.classifier = nn.Sequential(nn.Linear(last_conv, hidden), nn.Hardswish(),
                                        nn.Dropout(0.2), nn.Linear(hidden, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), 1).flatten(1)  # (n, last_conv)
        return self.classifier(x)


class BasicBlock(nn.Module):
    """ResNet's two 3x3 convs with a 1x1 stride-s projection on the shortcut when shapes change."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = conv_bn(cin, cout, 3, stride, act=nn.ReLU)
        self.conv2 = conv_bn(cout, cout, 3)
        self.shortcut = (conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout
                         else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv2(self.conv1(x)) + self.shortcut(x))


class ResNet18(nn.Module):
    """(n, 3, H, W) -> (n, classes); stage widths base * (1, 2, 4, 8), 64 in the paper."""

    def __init__(self, base: int = 64, classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, base, 7, 2, 3, bias=False), nn.BatchNorm2d(base), nn.ReLU(),
            nn.MaxPool2d(3, 2, 1))
        blocks: list[nn.Module] = []
        cin = base
        for stage in range(4):
            cout = base * 2 ** stage
            blocks += [BasicBlock(cin, cout, 1 if stage == 0 else 2), BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class ViTBlock(nn.Module):
    """Pre-norm: x + attn(ln1(x)), then x + mlp(ln2(x)) with exact GELU."""

    def __init__(self, width: int, heads: int, mlp: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width, eps=1e-6)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width, eps=1e-6)
        self.fc1 = nn.Linear(width, mlp)
        self.fc2 = nn.Linear(mlp, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, s, width = x.shape
        qkv = self.qkv(self.ln1(x)).view(n, s, 3, self.heads, width // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (n, heads, s, head_dim)
        w = torch.softmax(q @ k.transpose(-2, -1) * (width // self.heads) ** -0.5, dim=-1)
        o = (w @ v).transpose(1, 2).reshape(n, s, width)
        x = x + self.proj(o)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class ViT(nn.Module):
    """(n, 3, image, image) -> (n, classes): patch conv, class token, positions, blocks, head."""

    def __init__(self, image: int, patch: int, width: int, heads: int, mlp: int, layers: int,
                 classes: int) -> None:
        super().__init__()
        self.patch_embed = nn.Conv2d(3, width, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, width))
        self.pos_embed = nn.Parameter(torch.zeros(1, (image // patch) ** 2 + 1, width))
        self.blocks = nn.Sequential(*(ViTBlock(width, heads, mlp) for _ in range(layers)))
        self.ln = nn.LayerNorm(width, eps=1e-6)
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)  # (n, patches, width)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.ln(self.blocks(x))
        return self.head(x[:, 0])


def init_weights(model: nn.Module, gen: torch.Generator) -> nn.Module:
    """Seeded He-scaled weights, non-trivial norm affines and batch-norm statistics; eval mode."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Conv2d | nn.Linear):
                fan_in = m.weight[0].numel()
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) * (2.0 / fan_in) ** 0.5)
                if m.bias is not None:
                    m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=gen))
            elif isinstance(m, nn.BatchNorm2d | nn.LayerNorm):
                m.weight.copy_(1.0 + 0.2 * torch.randn(m.weight.shape, generator=gen))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=gen))
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=gen))
                    m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=gen))
        for name, p in model.named_parameters():
            if name in ("cls_token", "pos_embed"):
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
    return model.eval()
