//! Parsing: the annotated function into this crate's model of a kernel.

pub mod body;
pub mod helper;
pub mod model;
pub mod signature;

use proc_macro2::TokenStream;

use crate::errors::Errors;
use model::Kernel;

/// Parses `#[kernel(attr)] item`. Errors are collected; `None` when the item is not a
/// function at all.
pub fn parse(attr: TokenStream, item: TokenStream, errors: &mut Errors) -> Option<Kernel> {
    let signature::Attr {
        target,
        mut instances,
        schedule,
        strict_hardware,
    } = signature::parse_attr(attr, errors);
    let func: syn::ItemFn = match syn::parse2(item) {
        Ok(f) => f,
        Err(e) => {
            errors.push_syn(e);
            return None;
        }
    };
    let meta = signature::parse_meta(&func.sig, errors);
    signature::check_instances(&func.sig.ident, &meta, &mut instances, errors);
    let params = signature::parse_params(&func.sig, &meta, errors);
    let (returns, returns_span) = signature::parse_returns(&func.sig, &meta, errors);
    let body = body::parse_block(&func.block, errors);
    let attrs = func
        .attrs
        .into_iter()
        .filter(|a| a.path().is_ident("doc"))
        .collect();
    Some(Kernel {
        attrs,
        vis: func.vis,
        name: func.sig.ident,
        target,
        schedule,
        strict_hardware,
        meta,
        instances,
        helpers: Vec::new(),
        params,
        returns,
        returns_span,
        body,
    })
}
