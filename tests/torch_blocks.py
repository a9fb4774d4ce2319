"""Small PyTorch blocks the torchplan tests share: a Linear and a tanh, and variants
that do what a checkpoint's recomputation cannot repeat (each refused by name)."""
import torch


class LinTanh(torch.nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.lin = torch.nn.Linear(width, width)

    def forward(self, h):
        return torch.tanh(self.lin(h))


class Detached(LinTanh):
    """Cuts the gradient to its input."""

    def forward(self, h):
        return torch.tanh(self.lin(h.detach()))


class WritesInput(LinTanh):
    """Writes its input in place."""

    def forward(self, h):
        return self.lin(h.relu_())


class WritesWeight(LinTanh):
    """Halves its weight in every forward pass."""

    def forward(self, h):
        with torch.no_grad():
            self.lin.weight.mul_(0.5)
        return super().forward(h)
