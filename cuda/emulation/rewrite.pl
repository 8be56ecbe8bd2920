#!/usr/bin/perl
# cuda/emulation/rewrite.pl — rewrites a CUDA source (stdin → stdout) for the CPU emulation
# (emulation.hpp): kernel<<<cfg>>>(args) launches become linstate_emu::launch calls, inline PTX the
# emulation's functions (the instructions linstate uses; any other stops the program when reached),
# `extern __shared__ T x[]` a pointer to the block's buffer and other __shared__ variables statics,
# the cudaFunc* / occupancy calls on kernels the emulation's templates.
use strict; use warnings;
local $/; my $s = <STDIN>;
$s =~ s/^\s*#\s*error\s+"linstate\/cuda\.cuh is for CUDA.*$//m;
# device code paths: compiled for sm_90 (the kernels' __CUDA_ARCH__ branches; the CPU headers under
# include/ keep their host branches, and so does Eigen)
$s =~ s/defined\s*\(\s*__CUDA_ARCH__\s*\)/1/g;
$s =~ s/\b__CUDA_ARCH__\b/900/g;
# kernel launches
my $name = qr/(?:::)?[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*(?:<(?:[^<>;]|<(?:[^<>;]|<[^<>;]*>)*>)*>)?/;
my $bal = qr/\(((?:[^()]|\((?:[^()]|\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\))*\))*)\)/s;
$s =~ s/($name)\s*<<<(.*?)>>>\s*$bal/::linstate_emu::launch(::linstate_emu::cfg($2), "$1", std::make_tuple($3), [](auto&... x) { $1(x...); })/gs;
$s =~ s/\bcudaLaunchKernelEx\(/::linstate_emu::launch_ex_unsupported(/g;
$s =~ s/reinterpret_cast<const void\*>\(/::linstate_emu::fnaddr(/g;
$s =~ s/\bcudaFuncSetAttribute\(/::linstate_emu::func_set_attr(/g;
$s =~ s/\bcudaFuncGetAttributes\(/::linstate_emu::func_get_attrs(/g;
$s =~ s/\bcudaOccupancyMaxActiveBlocksPerMultiprocessor\(/::linstate_emu::occupancy(/g;
# dynamic shared memory: a pointer to the block's buffer
$s =~ s/extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?([\w:]+(?:\s+[\w:]+)*?)\s+(\w+)\s*\[\s*\]\s*;/$1* $2 = reinterpret_cast<$1*>(::linstate_emu::dyn_smem());/g;
$s =~ s/\b__shared__\b/static/g;
# inline asm statements
sub parse_ops { my ($t) = @_; my @r; while ($t =~ /"([^"]*)"\s*\(((?:[^()]|\((?:[^()]|\([^()]*\))*\))*)\)/g) { push @r, [$1, $2]; } return @r; }
sub conv_asm {
  my ($body) = @_;  # inside asm( ... )
  my ($tmpl) = ''; my $rest = $body;
  while ($rest =~ s/^\s*"((?:[^"\\]|\\.)*)"//s) { $tmpl .= $1; }
  my @parts = (''); my $depth = 0; my $instr = 0;
  for my $ch (split //, $rest) {
    if ($instr) { $instr = 0 if $ch eq '"'; $parts[-1] .= $ch; next; }
    if ($ch eq '"') { $instr = 1; } elsif ($ch eq '(') { ++$depth; } elsif ($ch eq ')') { --$depth; }
    if ($ch eq ':' && $depth == 0) { push @parts, ''; next; }
    $parts[-1] .= $ch;
  }
  my @outs = parse_ops($parts[1] // ''); my @ins = parse_ops($parts[2] // '');
  my @all = (@outs, @ins);
  my @e = map { "($_->[1])" } @all;
  $tmpl =~ s/\\n//g; $tmpl =~ s/^\s+//;
  if ($tmpl =~ /^mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.(bf16|f16)\.(bf16|f16)\.f32/) {
    my $f16 = $1 eq 'f16' ? 'true' : 'false';
    # outputs d0..d3 ("+f" or "=f"), inputs a0..a3 b0 b1 (and c0..c3 when "=f")
    if (@outs == 4 && @ins == 6) { return "::linstate_emu::mma_bf16($e[0],$e[1],$e[2],$e[3],$e[4],$e[5],$e[6],$e[7],$e[8],$e[9],$e[0],$e[1],$e[2],$e[3],$f16)"; }
    if (@outs == 4 && @ins == 10) { return "::linstate_emu::mma_bf16($e[0],$e[1],$e[2],$e[3],$e[4],$e[5],$e[6],$e[7],$e[8],$e[9],$e[10],$e[11],$e[12],$e[13],$f16)"; }
    return "::linstate_emu::unsupported(\"mma operands\")";
  }
  if ($tmpl =~ /^ldmatrix\.sync\.aligned\.m8n8\.x4(\.trans)?\.shared\.b16/) {
    my $tr = $1 ? 'true' : 'false';
    return "::linstate_emu::ldsm4($e[0],$e[1],$e[2],$e[3],$e[4],$tr)";
  }
  if ($tmpl =~ /^cp\.async\.(?:ca|cg)\.shared\.global \[%0\], \[%1\], (\d+), %2;/) { return "::linstate_emu::cp_async($e[0], reinterpret_cast<const void*>($e[1]), $1, $e[2])"; }
  if ($tmpl =~ /^cp\.async\.(?:ca|cg)\.shared\.global \[%0\], \[%1\], (\d+);/) { return "::linstate_emu::cp_async($e[0], reinterpret_cast<const void*>($e[1]), $1, $1)"; }
  if ($tmpl =~ /^cp\.async\.(commit|wait)/) { return "((void)0)"; }
  if ($tmpl =~ /^bar\.sync %0, %1;/) { return "::linstate_emu::named_barrier($e[0], $e[1])"; }
  if ($tmpl =~ /^ex2\.approx\.ftz\.f32 %0, %1;/) { return "($e[0] = exp2f($e[1]))"; }
  if ($tmpl eq '') { return "((void)0)"; }
  if ($tmpl =~ /^mov\.b32 %0, %1;/) { return "($e[0] = $e[1])"; }
  return "::linstate_emu::unsupported(\"asm: $tmpl\")";
}
$s =~ s/\basm\s*(?:volatile\s*)?\(((?:[^()]|\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\))*)\)/conv_asm($1)/gse;
print $s;
