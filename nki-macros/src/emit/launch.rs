//! The kernel's launch functions: device tensors in and out, destination-passing, and
//! `ndarray` views in with arrays out.

use nki_lang::DType;
use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};

use super::paths::{item, private};
use crate::parse::model::{Instance, Kernel, MetaValue, TensorType};

fn elem(d: DType) -> TokenStream {
    match d {
        DType::F32 => quote!(::core::primitive::f32),
        DType::Tf32 => item("Tf32"),
        DType::Bf16 => item("bf16"),
        DType::F16 => item("f16"),
        DType::F8E4M3 => item("F8E4M3"),
        DType::F8E5M2 => item("F8E5M2"),
        DType::I8 => quote!(::core::primitive::i8),
        DType::I16 => quote!(::core::primitive::i16),
        DType::I32 => quote!(::core::primitive::i32),
        DType::U8 => quote!(::core::primitive::u8),
        DType::U16 => quote!(::core::primitive::u16),
        DType::U32 => quote!(::core::primitive::u32),
        DType::Bool => item("Bool"),
        DType::F8E4M3Fn => item("F8E4M3Fn"),
        DType::F4E2M1Fn => item("F4E2M1Fn"),
        DType::F8E8M0Fnu => item("F8E8M0Fnu"),
        DType::F8E5M2X4 => item("F8E5M2X4"),
        DType::F8E4M3FnX4 => item("F8E4M3FnX4"),
        DType::F4E2M1FnX4 => item("F4E2M1FnX4"),
    }
}

fn ix(rank: usize) -> TokenStream {
    let p = private();
    let id = format_ident!("Ix{}", rank);
    quote!(#p::ndarray::#id)
}

fn returns<T>(items: &[T], f: impl Fn(&T) -> TokenStream) -> TokenStream {
    match items {
        [one] => f(one),
        many => {
            let each = many.iter().map(f);
            quote!((#(#each),*))
        }
    }
}

/// The launch functions; `body` says whether to emit working bodies or (after an error) stubs.
pub fn launch(
    k: &Kernel,
    instance: Option<&Instance>,
    working: bool,
    program: TokenStream,
) -> TokenStream {
    let p = private();
    let name = instance.map_or(&k.name, |i| &i.name);
    let vis = &k.vis;
    let mut attrs: Vec<TokenStream> = k.attrs.iter().map(|a| quote!(#a)).collect();
    if let Some(i) = instance {
        let doc = format!(
            "The instantiation of [`{}`](mod@{}) with {}.",
            k.name,
            k.name,
            settings(i)
        );
        attrs.push(quote!(#[doc = ""]));
        attrs.push(quote!(#[doc = #doc]));
    }
    let names: Vec<&Ident> = k.params.iter().map(|p| &p.binding).collect();
    let ins: Vec<TokenStream> = k.params.iter().map(|p| elem(p.ty.dtype)).collect();
    let outs: Vec<(Ident, &TensorType)> = k
        .returns
        .iter()
        .enumerate()
        .map(|(i, t)| (local(&format!("out{i}")), t))
        .collect();
    // The expansion's own locals are hygienic, so that a kernel parameter may have any name
    // (`core`, `inputs`, `out0`, ...); its items are reached through `self::`.
    let (core, inputs, checked, grid) = (
        local("core"),
        local("inputs"),
        local("checked"),
        local("grid"),
    );
    let out_names: Vec<&Ident> = outs.iter().map(|(n, _)| n).collect();
    let out_elems: Vec<TokenStream> = outs.iter().map(|(_, t)| elem(t.dtype)).collect();
    let device_t = item("DeviceTensor");
    let core_t = item("NeuronCore");
    let err_t = item("LaunchError");
    let kernel_t = item("Kernel");
    let grid_t = item("LaunchGrid");
    let result = quote!(::core::result::Result);
    let dev_ret = returns(&outs, |(_, t)| {
        let e = elem(t.dtype);
        quote!(#device_t<#e>)
    });
    let host_ret = returns(&outs, |(_, t)| {
        let (e, d) = (elem(t.dtype), ix(t.dims.len()));
        quote!(#p::ndarray::Array<#e, #d>)
    });
    let ok_tuple = returns(&out_names, |n| quote!(#n));
    let host_params: Vec<TokenStream> = k
        .params
        .iter()
        .map(|prm| {
            let (n, e, d) = (&prm.binding, elem(prm.ty.dtype), ix(prm.ty.dims.len()));
            quote!(#n: #p::ndarray::ArrayView<'_, #e, #d>)
        })
        .collect();
    let idx: Vec<usize> = (0..outs.len()).collect();
    let host_dims: Vec<TokenStream> = outs.iter().map(|(_, t)| ix(t.dims.len())).collect();
    let (b_launch, b_into, b_host) = if working {
        (
            quote! {
                let #inputs = [#(#names.arg()),*];
                let #checked = self::KERNEL.check_inputs_on(self.0, &#inputs)?;
                #(let mut #out_names = #p::device_output::<#out_elems>(&self::KERNEL, #idx, #checked.symbols())?;)*
                #p::run_checked(#core, #checked, &mut [#(#out_names.arg_mut()),*])?;
                ::core::result::Result::Ok(#ok_tuple)
            },
            quote! {
                #p::run_on(#core, &self::KERNEL, self.0, &[#(#names.arg()),*], &mut [#(#out_names.arg_mut()),*])
            },
            quote! {
                #(let #names = #p::HostInput::new(&#names)?;)*
                let #inputs = [#(#names.arg()),*];
                let #checked = self::KERNEL.check_inputs_on(self.0, &#inputs)?;
                #(let mut #out_names = #p::host_output::<#out_elems, #host_dims>(&self::KERNEL, #idx, #checked.symbols())?;)*
                #p::run_checked(#core, #checked, &mut [#(#p::host_output_arg(&mut #out_names)?),*])?;
                ::core::result::Result::Ok(#ok_tuple)
            },
        )
    } else {
        let stub = quote!(::core::unreachable!("the kernel failed to compile"));
        (stub.clone(), stub.clone(), stub)
    };
    let doc_mod = format!(
        "The compiled program of the kernel [`{name}()`](fn@{name}) and its other launch forms."
    );
    quote! {
        #(#attrs)*
        ///
        /// Launches the kernel on `core` with device-resident inputs and returns its outputs,
        /// allocated in the modeled HBM. See the module of the same name for the program and the
        /// other launch forms.
        #[allow(clippy::too_many_arguments)]
        #vis fn #name(#core: &mut #core_t, #(#names: &#device_t<#ins>),*) -> #result<#dev_ret, #err_t> {
            #name::launch(#core, #(#names),*)
        }

        #[doc = #doc_mod]
        #[allow(clippy::too_many_arguments, unused_variables, unused_mut)]
        #vis mod #name {
            #[allow(unused_imports)]
            use super::*;

            /// The kernel's program, built and checked at compile time.
            pub static KERNEL: #kernel_t<'static> = #kernel_t::new(#program);

            /// Launches the kernel with device-resident inputs; allocates the outputs.
            pub fn launch(#core: &mut #core_t, #(#names: &#device_t<#ins>),*) -> #result<#dev_ret, #err_t> {
                self::Grid(#grid_t::SINGLE).launch(#core, #(#names),*)
            }

            /// Launches the kernel writing into caller-provided outputs: no allocation.
            pub fn launch_into(#core: &mut #core_t, #(#names: &#device_t<#ins>,)* #(#out_names: &mut #device_t<#out_elems>),*) -> #result<(), #err_t> {
                self::Grid(#grid_t::SINGLE).launch_into(#core, #(#names,)* #(#out_names),*)
            }

            /// Launches the kernel on `ndarray` views (any layout) and returns `ndarray` arrays.
            pub fn host(#core: &mut #core_t, #(#host_params),*) -> #result<#host_ret, #err_t> {
                self::Grid(#grid_t::SINGLE).host(#core, #(#names),*)
            }

            /// The kernel launched over an SPMD grid, NKI's `kernel[2, 4](...)`:
            /// `grid([2, 4]).launch(core, ...)` runs one instance per point of the grid, each
            /// reading its coordinates with `program_id(axis)`.
            pub fn grid(#grid: impl ::core::convert::Into<#grid_t>) -> Grid {
                Grid(#grid.into())
            }

            /// The kernel and a launch grid (see [`grid()`]); its methods are the launch forms.
            #[derive(Copy, Clone, Debug)]
            pub struct Grid(pub #grid_t);

            impl Grid {
                /// Launches the grid with device-resident inputs; allocates the outputs.
                pub fn launch(&self, #core: &mut #core_t, #(#names: &#device_t<#ins>),*) -> #result<#dev_ret, #err_t> {
                    #b_launch
                }

                /// Launches the grid writing into caller-provided outputs: no allocation.
                pub fn launch_into(&self, #core: &mut #core_t, #(#names: &#device_t<#ins>,)* #(#out_names: &mut #device_t<#out_elems>),*) -> #result<(), #err_t> {
                    #b_into
                }

                /// Launches the grid on `ndarray` views (any layout) and returns `ndarray`
                /// arrays.
                pub fn host(&self, #core: &mut #core_t, #(#host_params),*) -> #result<#host_ret, #err_t> {
                    #b_host
                }
            }
        }
    }
}

/// An identifier of the expansion's own, invisible to the kernel's names (mixed-site hygiene).
fn local(name: &str) -> Ident {
    Ident::new(name, proc_macro2::Span::mixed_site())
}

/// `A = 16, B = true`: an instantiation's meta-parameter values.
pub fn settings(i: &Instance) -> String {
    let each: Vec<String> = i
        .values
        .iter()
        .map(|(p, v, _)| format!("{p} = {v}"))
        .collect();
    each.join(", ")
}

/// The module of a kernel with meta-parameters, listing its instantiations.
pub fn instances(k: &Kernel) -> TokenStream {
    let vis = &k.vis;
    let name = &k.name;
    let inst_t = item("Instance");
    let meta_t = item("MetaValue");
    let rows = k.instances.iter().map(|i| {
        let n = &i.name;
        let label = n.to_string();
        let values = i.values.iter().map(|(p, v, _)| {
            let p = p.to_string();
            let v = match *v {
                MetaValue::Int(n) => quote!(#meta_t::Int(#n)),
                MetaValue::Float(b) => quote!(#meta_t::Float(#b)),
                MetaValue::Bool(b) => quote!(#meta_t::Bool(#b)),
                MetaValue::DType(d) => {
                    let d = super::program::variant("DType", d);
                    quote!(#meta_t::DType(#d))
                }
            };
            quote!((#p, #v))
        });
        quote!(#inst_t { name: #label, values: &[#(#values),*], kernel: &super::#n::KERNEL })
    });
    let doc = format!(
        "The instantiations of the kernel `{name}`, one per meta-parameter set of its attribute."
    );
    let n = k.instances.len();
    quote! {
        #[doc = #doc]
        #vis mod #name {
            #[allow(unused_imports)]
            use super::*;

            /// Each instantiation: its name, its meta-parameters' values and its program.
            pub static INSTANCES: [#inst_t; #n] = [#(#rows),*];
        }
    }
}

/// An empty program for the fallback item emitted after an error.
pub fn empty_program(k: &Kernel, instance: Option<&Instance>) -> TokenStream {
    let program_t = item("Program");
    let target_t = item("Target");
    let name = instance.map_or(&k.name, |i| &i.name).to_string();
    quote!(#program_t::from_checked_parts(#name, #target_t::Trn1, &[], &[], &[], &[], &[], &[], &[], &[], &[], &[], &[], 0, 0))
}
